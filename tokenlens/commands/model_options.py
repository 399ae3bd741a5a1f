"""Command-line options made from a pydantic model's fields, so a command and the model
it fills (the `calibrate` flow's `CalibrateParams`) cannot drift apart.

Each field becomes `--field-name` with the field's description as its help; a boolean
becomes a switch, a `Literal` a choice, a tuple a comma-separated list. Every option
defaults to "not given" (None), so only what the user typed reaches the model and the
model's own defaults (and its record of what was set) stay the model's business.
"""

from __future__ import annotations

import argparse
import types
from collections.abc import Callable, Iterable
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo


def _plain(annotation: Any) -> Any:
    """`X | None` -> X."""
    if get_origin(annotation) in (Union, types.UnionType):
        kept = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(kept) == 1:
            return kept[0]
    return annotation


def _items(parse: Callable[[str], Any], what: str) -> Callable[[str], tuple[Any, ...]]:
    def parse_list(text: str) -> tuple[Any, ...]:
        try:
            return tuple(parse(part.strip()) for part in text.split(",") if part.strip())
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"expected {what}: {exc}") from exc

    return parse_list


def option_kwargs(field: FieldInfo) -> dict[str, Any]:
    """`add_argument` keyword arguments for one field (type, choices or switch, help)."""
    kind = _plain(field.annotation)
    help_text = (field.description or "").replace("%", "%%")
    if kind is bool:
        return {"action": "store_true", "default": None, "help": help_text}
    if get_origin(kind) is Literal:
        return {"choices": get_args(kind), "default": None, "help": help_text}
    if get_origin(kind) in (tuple, list):
        item = get_args(kind)[0]
        what = "comma-separated numbers like 0.8,0.6" if item is float else "a,b,c"
        metavar = "X,Y" if item is float else "A,B"
        return {"type": _items(item, what), "metavar": metavar, "default": None, "help": help_text}
    return {"type": kind, "default": None, "help": help_text}


def add_model_options(
    parser: argparse.ArgumentParser,
    model: type[BaseModel],
    *,
    skip: Iterable[str] = (),
    flags: dict[str, list[str]] | None = None,
    extra: dict[str, dict[str, Any]] | None = None,
) -> None:
    """Add one option per field of `model` (except `skip`); `flags` renames an option
    (first spelling shown), `extra` overrides `add_argument` arguments of one."""
    for name, field in model.model_fields.items():
        if name in set(skip):
            continue
        names = (flags or {}).get(name, ["--" + name.replace("_", "-")])
        kwargs = {**option_kwargs(field), **(extra or {}).get(name, {})}
        parser.add_argument(*names, dest=name, **kwargs)


def given(args: argparse.Namespace, model: type[BaseModel]) -> dict[str, Any]:
    """The model's fields the user gave on the command line."""
    return {
        name: getattr(args, name)
        for name in model.model_fields
        if getattr(args, name, None) is not None
    }
