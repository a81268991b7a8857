"""YAML with places: mappings and lists that remember file, line and column.

Rule files are read with PyYAML's composer, so every mapping key and list item
keeps its position and errors can name ``file:line:col``.  Duplicate keys,
which PyYAML silently accepts, are errors here.  Only the safe tags load; an
alias may not contain itself, aliases may not expand a file beyond
:data:`MAX_NODES` values (a "billion laughs" file is an error, not 4 GB), and
nesting may not go deeper than :data:`MAX_DEPTH`.
"""

from __future__ import annotations

from dataclasses import dataclass

from sdy_dl.errors import SdyError

#: The most values (mappings, lists, scalars) one rule file may expand to.
MAX_NODES = 50_000
#: The deepest nesting of mappings and lists a rule file may have.
MAX_DEPTH = 256


@dataclass(frozen=True)
class Loc:
    """A place in a rule file (1-based line and column)."""

    file: str
    line: int
    col: int

    def error(self, message: str) -> SdyError:
        return SdyError(message, self.file, self.line, self.col)

    def locate(self, error: SdyError) -> SdyError:
        """``error`` placed here where its place is still unknown."""
        return error.located(self.file, self.line, self.col)

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
    """Parse one YAML document into plain values, YMap and YList.

    libyaml composes the nodes (about 10x faster) when PyYAML has it; a
    document it rejects is composed again by PyYAML's pure-Python composer,
    whose messages the errors quote.  (PyYAML is imported here, not with the
    module: a run whose rule files are in the cache never loads it.)"""
    import yaml

    try:
        try:
            node = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except yaml.YAMLError:
            node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        problem = getattr(e, "problem", None) or str(e)
        if mark is not None:
            raise SdyError(f"invalid YAML: {problem}", file, mark.line + 1,
                           mark.column + 1) from None
        raise SdyError(f"invalid YAML: {problem}", file) from None
    except RecursionError:
        raise SdyError("invalid YAML: nested too deeply", file) from None
    if node is None:
        return None
    return _Converter(file, text).convert(node)


class _Converter:
    """Composed YAML nodes to plain values, YMap and YList (iteratively, so that
    neither nesting nor alias chains hit the recursion limit)."""

    def __init__(self, file: str, text: str):
        import yaml

        self.file, self.text = file, text
        self.constructor = yaml.SafeLoader("")
        self.count = 0

    def error(self, node, message: str) -> SdyError:
        return SdyError(message, self.file, node.start_mark.line + 1,
                        node.start_mark.column + 1)

    def scalar(self, node):
        import yaml

        try:
            return self.constructor.construct_object(node)
        except yaml.YAMLError as e:
            raise self.error(node, f"invalid YAML: {getattr(e, 'problem', None) or e}") from None

    def convert(self, root):
        import yaml

        result: list = []
        # Frames: (node, container, pending children, place to store the result).
        stack = [(root, None, None, (result, None))]
        on_path: set[int] = set()
        while stack:
            node, container, pending, dest = stack[-1]
            if container is None:
                if len(stack) > MAX_DEPTH:
                    raise self.error(node, "invalid YAML: nested too deeply")
                self.count += 1
                if self.count > MAX_NODES:
                    raise self.error(node, f"YAML aliases expand to more than {MAX_NODES} values")
                if id(node) in on_path:
                    raise self.error(node, "YAML alias refers to itself")
                if isinstance(node, yaml.MappingNode):
                    container, pending = self.new_map(node), iter(node.value)
                elif isinstance(node, yaml.SequenceNode):
                    container, pending = YList(), iter(enumerate(node.value))
                    container.loc = _loc(self.file, node.start_mark)
                    container.item_locs = [_loc(self.file, n.start_mark) for n in node.value]
                    container.extend([None] * len(node.value))
                else:
                    stack.pop()
                    _store(dest, self.scalar(node))
                    continue
                on_path.add(id(node))
                stack[-1] = (node, container, pending, dest)
            child = next(pending, None)
            if child is None:
                stack.pop()
                on_path.discard(id(node))
                _store(dest, container)
            elif isinstance(container, YMap):
                key_node, value_node = child
                key = self.map_key(container, key_node, value_node)
                stack.append((value_node, None, None, (container, key)))
            else:
                i, item = child
                stack.append((item, None, None, (container, i)))
        return result[0]

    def new_map(self, node) -> "YMap":
        out = YMap()
        out.loc = _loc(self.file, node.start_mark)
        out.key_locs, out.value_locs, out.key_sources = {}, {}, {}
        return out

    def map_key(self, out: "YMap", key_node, value_node) -> str:
        import yaml

        if not isinstance(key_node, yaml.ScalarNode):
            raise self.error(key_node, "mapping keys must be plain strings")
        key = self.scalar(key_node)
        key = key if isinstance(key, str) else str(key)
        if key in out:
            raise self.error(key_node, f"duplicate key '{key}'")
        out[key] = None
        out.key_locs[key] = _loc(self.file, key_node.start_mark)
        out.value_locs[key] = _loc(self.file, value_node.start_mark)
        out.key_sources[key] = _dedent(
            self.text[_line_start(self.text, key_node.start_mark.index):value_node.end_mark.index])
        return key


def _store(dest, value) -> None:
    container, slot = dest
    if slot is None and isinstance(container, list) and not isinstance(container, YList):
        container.append(value)
    else:
        container[slot] = value


def _line_start(text: str, index: int) -> int:
    return text.rfind("\n", 0, index) + 1


def _dedent(text: str) -> str:
    import textwrap
    return textwrap.dedent(text).rstrip()
