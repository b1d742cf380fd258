"""Check a widget's arguments without running its op: what the page asks when the reader leaves a field.

The page's fields are checked by the same Python that runs the op (a JavaScript copy of the checks
would disagree with it: Python's float() takes "1_000", for one). An op whose arguments can be checked
on their own carries its check, a function of the op's args that parses them exactly as the op does
and raises InputError (or returns), runs nothing and changes no state:

    @checked_by(validate_calculator)
    def calculator(session, args):
        v = validate_calculator(args)
        ...

The core ops of pylib.web (lambdas in its _OPS) have theirs in CORE_CHECKS. One op serves every widget:

  check_args  {op, args} -> {"checked": true, "errors": {field: message}} (no errors: the args are
              good), or {"checked": false, "errors": {}} when op has no check of its own (its
              arguments are then checked when it runs, as before). A chunked run "run:<name>" is
              checked through "<name>_start", the op that reads its arguments (the page maps it).
"""

from pylib.web.inputs import InputError, validate_train_settings


def checked_by(check):
    """Decorator: fn's arguments are checked by check(args), for op check_args."""

    def mark(fn):
        fn.check = check
        return fn

    return mark


# The core ops' checks: what Session.start_run checks before it sets up a run.
CORE_CHECKS = {
    "train_start": lambda args: validate_train_settings(args.get("settings") or {}),
}


def _check_of(op):
    if op in CORE_CHECKS:
        return CORE_CHECKS[op]
    from pylib.web import find_op  # here, not at the top: pylib.web imports this module through find_op

    try:
        return getattr(find_op(op), "check", None)
    except KeyError:
        return None


def check_args(session, args):
    """{op, args} -> {"checked", "errors"}: op's own check of its args, without running op."""
    op, op_args = args.get("op"), args.get("args")
    check = _check_of(op) if isinstance(op, str) else None
    if check is None:
        return {"checked": False, "errors": {}}
    try:
        check(op_args if isinstance(op_args, dict) else {})
    except InputError as e:
        return {"checked": True, "errors": e.errors}
    return {"checked": True, "errors": {}}


OPS = {
    "check_args": check_args,
}
