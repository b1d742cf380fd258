"""The exercises from a terminal, with the same checks and messages as the page.

    python -m pylib.exercises list [ch5]           the exercises, with their kinds
    python -m pylib.exercises show ch5.heavy_ball  one exercise's task and starter (or ch5: all of them)
    python -m pylib.exercises starter ch5 > my_answers.py   a file to fill in: every starter
    python -m pylib.exercises check ch5 my_answers.py       check what the file answers
    python -m pylib.exercises hint ch5.heavy_ball [n]  the n-th hint (default: the first)
    python -m pylib.exercises solution ch5.heavy_ball  the reference solution

Exit status of check: 0 when every answered exercise passes, 1 otherwise."""

import argparse
import sys

from pylib import exercises


def _name(ex):
    return ex.function if ex.takes_code else ex.id.split(".", 1)[1]


def starter_file(chapter):
    """The text of an answers file for chapter: every code starter, and a line per prediction."""
    parts = [f'"""Answers to chapter {int(str(chapter).removeprefix("ch"))}\'s exercises: '
             f'check with python -m pylib.exercises check {chapter} <this file>."""\n']
    for ex in exercises.of_chapter(chapter):
        parts.append(f"# {ex.id}: {ex.title} ({ex.kind})")
        if ex.takes_code:
            parts.append(ex.starter.rstrip() + "\n")
        else:
            unit = f" ({ex.unit})" if ex.unit else ""
            parts.append(f"{_name(ex)} = None  # your prediction{unit}\n")
    return "\n".join(parts)


def show(ex):
    print(f"{ex.id}: {ex.title} ({ex.kind})\n\n{ex.task.strip()}\n")
    if ex.takes_code:
        print(ex.starter)
    else:
        print(f"Answer with: {_name(ex)} = <your number>" + (f" ({ex.unit})" if ex.unit else ""))
    print(f"{len(ex.hints)} hints: python -m pylib.exercises hint {ex.id} 1\n")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m pylib.exercises", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list", help="list the exercises")
    p.add_argument("chapter", nargs="?")
    p = sub.add_parser("show", help="one exercise's task and starter")
    p.add_argument("id")
    p = sub.add_parser("starter", help="an answers file to fill in for a chapter")
    p.add_argument("chapter")
    p = sub.add_parser("check", help="check a file of answers")
    p.add_argument("chapter")
    p.add_argument("file")
    p = sub.add_parser("hint", help="a hint")
    p.add_argument("id")
    p.add_argument("n", nargs="?", type=int, default=1)
    p = sub.add_parser("solution", help="the reference solution")
    p.add_argument("id")
    args = parser.parse_args(argv)

    try:
        if args.command == "list":
            chosen = exercises.of_chapter(args.chapter) if args.chapter else exercises.exercises().values()
            for ex in chosen:
                print(f"{ex.id:32} {ex.kind:12} {ex.title}")
            return 0
        if args.command == "starter":
            if not exercises.of_chapter(args.chapter):
                print(f"No exercises for {args.chapter}.", file=sys.stderr)
                return 2
            print(starter_file(args.chapter), end="")
            return 0
        if args.command == "check":
            return 1 if exercises.check_file(args.chapter, args.file) else 0
        if args.command == "show" and "." not in args.id and exercises.of_chapter(args.id):
            for ex in exercises.of_chapter(args.id):
                show(ex)
            return 0
        ex = exercises.get(args.id)
    except (KeyError, OSError, ValueError) as e:
        print(e.args[0] if isinstance(e, (KeyError, ValueError)) else e, file=sys.stderr)
        return 2
    if args.command == "show":
        show(ex)
    elif args.command == "hint":
        if not 1 <= args.n <= len(ex.hints):
            print(f"{ex.id} has hints 1 to {len(ex.hints)}.", file=sys.stderr)
            return 2
        print(ex.hints[args.n - 1])
    elif args.command == "solution":
        print(ex.solution)
    return 0


if __name__ == "__main__":
    sys.exit(main())
