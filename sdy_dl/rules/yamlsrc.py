"""YAML with places: mappings and lists that remember file, line and column.

Rule files are read with PyYAML's composer, so every mapping key and list item
keeps its position and errors can name ``file:line:col``.  Duplicate keys,
which PyYAML silently accepts, are errors here.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from sdy_dl.errors import SdyError


@dataclass(frozen=True)
class Loc:
    """A place in a rule file (1-based line and column)."""

    file: str
    line: int
    col: int

    def error(self, message: str) -> SdyError:
        return SdyError(message, self.file, self.line, self.col)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


def _loc(file: str, mark) -> Loc:
    return Loc(file, mark.line + 1, mark.column + 1)


class YMap(dict):
    """A YAML mapping with the place of itself, of each key and of each value."""

    loc: Loc
    key_locs: dict
    value_locs: dict
    key_sources: dict    # key -> text of "key: value", from the start of the key's line

    def at(self, key) -> Loc:
        """The place of ``key`` (the mapping's own place if absent)."""
        return self.key_locs.get(key, self.loc)

    def value_at(self, key) -> Loc:
        return self.value_locs.get(key, self.at(key))


class YList(list):
    """A YAML sequence with the place of itself and of each item."""

    loc: Loc
    item_locs: list


def load_yaml(text: str, file: str):
    """Parse one YAML document into plain values, YMap and YList."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        problem = getattr(e, "problem", None) or str(e)
        if mark is not None:
            raise SdyError(f"invalid YAML: {problem}", file, mark.line + 1,
                           mark.column + 1) from None
        raise SdyError(f"invalid YAML: {problem}", file) from None
    if node is None:
        return None
    constructor = yaml.SafeLoader("")
    return _convert(node, file, text, constructor)


def _convert(node, file: str, text: str, constructor):
    if isinstance(node, yaml.MappingNode):
        out = YMap()
        out.loc = _loc(file, node.start_mark)
        out.key_locs, out.value_locs, out.key_sources = {}, {}, {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise SdyError("mapping keys must be plain strings", file,
                               key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            key = constructor.construct_object(key_node)
            key = key if isinstance(key, str) else str(key)
            if key in out:
                raise SdyError(f"duplicate key '{key}'", file, key_node.start_mark.line + 1,
                               key_node.start_mark.column + 1)
            out[key] = _convert(value_node, file, text, constructor)
            out.key_locs[key] = _loc(file, key_node.start_mark)
            out.value_locs[key] = _loc(file, value_node.start_mark)
            out.key_sources[key] = _dedent(
                text[_line_start(text, key_node.start_mark.index):value_node.end_mark.index])
        return out
    if isinstance(node, yaml.SequenceNode):
        out_list = YList(_convert(n, file, text, constructor) for n in node.value)
        out_list.loc = _loc(file, node.start_mark)
        out_list.item_locs = [_loc(file, n.start_mark) for n in node.value]
        return out_list
    return constructor.construct_object(node)


def _line_start(text: str, index: int) -> int:
    return text.rfind("\n", 0, index) + 1


def _dedent(text: str) -> str:
    import textwrap
    return textwrap.dedent(text).rstrip()
