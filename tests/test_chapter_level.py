"""A chapter shows code at its own level: no function or dataclass pulled into a chapter takes a
parameter named for an idea a later chapter teaches (the table is chapters/ideas.yaml)."""

import dataclasses
import importlib
import inspect
import pathlib
import re

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
PULLED = re.compile(r"""\{\{\s*(?:code|editable)\(\s*["']([\w.]+)["']""")


def ideas():
    """{parameter name: (chapter that teaches it, the idea)} from chapters/ideas.yaml."""
    table = {}
    for row in yaml.safe_load((ROOT / "chapters" / "ideas.yaml").read_text()):
        for name in row["names"]:
            assert name not in table, f"{name} is in two rows of chapters/ideas.yaml"
            table[name] = (row["chapter"], row["idea"])
    return table


def pulled():
    """[(chapter number, dotted name)] of every function or class a chapter shows."""
    out = []
    for path in sorted((ROOT / "chapters").glob("[0-9][0-9]-*.md")):
        chapter = int(path.name[:2])
        out += [(chapter, name) for name in PULLED.findall(path.read_text())]
    return out


def parameters(name):
    """The parameter names of a function, or the field names of a dataclass."""
    module, _, attr = name.rpartition(".")
    obj = getattr(importlib.import_module(module), attr)
    if dataclasses.is_dataclass(obj):
        return [f.name for f in dataclasses.fields(obj)]
    return list(inspect.signature(obj).parameters)


def later_ideas(chapter, names, table):
    """The names among names that a later chapter than this one teaches, with that chapter."""
    return {n: table[n][0] for n in names if n in table and table[n][0] > chapter}


def test_no_pulled_function_takes_a_later_chapters_parameter():
    table = ideas()
    found = {f"chapter {ch}: {name}": later_ideas(ch, parameters(name), table) for ch, name in pulled()}
    found = {k: v for k, v in found.items() if v}
    assert not found, "code shown before its ideas are taught (parameter: chapter that teaches it): " + repr(found)


def test_the_check_sees_what_chapters_show():
    shown = dict.fromkeys(n for _, n in pulled())
    assert {"pylib.optim.adamw_step", "pylib.train.train_step", "pylib.train.LoopConfig",
            "pylib.model.forward", "pylib.model.loss_and_grads"} <= set(shown)
    assert {"lr", "grad_clip", "grad_accum"} <= set(parameters("pylib.train.LoopConfig"))
    assert parameters("pylib.optim.clip_grad_norm") == ["grads", "max_norm"]


def test_the_check_fails_on_the_all_in_one_functions():
    # The functions as they were before chapter-level layering (tests/allinone.py): chapter 1 showing
    # them would fail, and TrainConfig, which carries the later chapters' options, would too.
    import allinone

    table = ideas()
    assert later_ideas(1, list(inspect.signature(allinone.adamw_step).parameters), table) == {
        "lr_mult": 7, "decoupled": 5, "mult_decay": 7}
    assert later_ideas(1, list(inspect.signature(allinone.loss_and_grads).parameters), table) == {
        "doc_ids": 2, "reset_positions": 2, "z_loss": 8}
    assert set(later_ideas(1, parameters("pylib.train.TrainConfig"), table)) == {
        "optimizer", "momentum", "schedule", "decay_frac", "mup_constant_decay", "skip_factor", "z_loss"}


@pytest.mark.parametrize("name", ["pylib.optim.adamw_step", "pylib.train.train_step", "pylib.model.forward",
                                  "pylib.loss.cross_entropy_forward", "pylib.model.loss_and_grads"])
def test_chapter_one_core_reads_at_once(name):
    # About 25 lines at most for a function the first chapters build on, docstring and comments included.
    module, _, attr = name.rpartition(".")
    lines = inspect.getsource(getattr(importlib.import_module(module), attr)).splitlines()
    assert len(lines) <= 27, f"{name} is {len(lines)} lines"
