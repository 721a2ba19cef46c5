"""Read a configuration YAML file that may be hostile or careless, and refuse it cleanly.

`yaml.safe_load` alone refuses Python tags, but it lets the last of two duplicate keys win,
expands aliases without limit (a 2.7 KB "billion laughs" file became a 226 MB error message),
recurses on deep nesting until Python's stack overflows, and blocks forever on a FIFO. This reader
bounds all of that before any value reaches the schema, and remembers each value's line so errors
can point at it. Every refusal is a `ConfigFileError` naming the file (and line where there is one).
"""

from __future__ import annotations

import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from model_build.errors import ModelBuildError

# Budgets. The shipped configs are ~3 KB, nest 7 levels and hold ~300 nodes; a config with a
# hundred models stays far below these, while anything above them is a mistake or an attack.
MAX_FILE_BYTES = 256 * 1024
MAX_DEPTH = 32
MAX_NODES = 20_000  # after expanding aliases and merge keys
MAX_ALIASES = 200
# What an error message may echo of the user's input.
MAX_ECHO_CHARS = 120

MERGE_TAG = "tag:yaml.org,2002:merge"
NULL_TAG = "tag:yaml.org,2002:null"
TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
NULL_SPELLINGS = ("", "~", "null", "Null", "NULL")


class ConfigFileError(ModelBuildError):
    """The file cannot be read as a configuration; the message names the file and line."""


@dataclass(frozen=True)
class ConfigDocument:
    """A parsed file: its data and the line (1-based) of every value, keyed by field path."""

    data: dict
    lines: dict[tuple, int] = field(default_factory=dict)

    def line_of(self, loc: tuple) -> int | None:
        """Line of the value at `loc`, or of its nearest enclosing value (a missing key's mapping)."""
        for end in range(len(loc), -1, -1):
            line = self.lines.get(tuple(loc[:end]))
            if line is not None:
                return line
        return None


def clip(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    """At most `limit` characters of something the user wrote, marked when cut."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def read_config_document(path: Path) -> ConfigDocument:
    """Parse `path` as one YAML mapping within the budgets above; raise ConfigFileError otherwise."""
    text = _read_text(path)
    loader = None
    try:
        loader = _BoundedLoader(text, path)  # the reader refuses control characters already here
        root = loader.get_single_node()
        if root is None:
            raise ConfigFileError(f"{path}: the file is empty; expected a mapping at the top level")
        lines: dict[tuple, int] = {}
        _check_budget(root, path, lines, loader.node_locs, loader.mark_locs)
        data = loader.construct_document(root)
    except ConfigFileError:
        raise
    except yaml.MarkedYAMLError as error:
        # A constructor's error (a tag) points at a node whose field path is known: name it.
        mark = error.problem_mark or error.context_mark
        loc = loader.mark_locs.get(mark.index) if loader is not None and mark is not None else None
        raise ConfigFileError(_yaml_message(path, error, loc)) from None
    except yaml.YAMLError as error:
        raise ConfigFileError(f"{path}: not valid YAML: {clip(str(error))}") from None
    except RecursionError:
        raise ConfigFileError(f"{path}: nested deeper than {MAX_DEPTH} levels; a config needs far fewer") from None
    finally:
        if loader is not None:
            loader.dispose()
    if not isinstance(data, dict):
        raise ConfigFileError(f"{path}: expected a mapping at the top level, got a {type(data).__name__}")
    return ConfigDocument(data=data, lines=lines)


def _read_text(path: Path) -> str:
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ConfigFileError(f"{path}: no such config file") from None
    except OSError as error:
        raise ConfigFileError(f"{path}: cannot be read: {error.strerror or error}") from None
    if stat.S_ISDIR(info.st_mode):
        raise ConfigFileError(f"{path}: is a directory; expected a YAML file")
    if not stat.S_ISREG(info.st_mode):
        # A FIFO or device would block or never end.
        raise ConfigFileError(f"{path}: is not a regular file; expected a YAML file")
    try:
        with path.open("rb") as stream:
            raw = stream.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise ConfigFileError(f"{path}: cannot be read: {error.strerror or error}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigFileError(f"{path}: larger than {MAX_FILE_BYTES // 1024} KiB; a configuration is a few KB")
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ConfigFileError(f"{path}: is UTF-16; save it as UTF-8")
    raw = raw.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte-order mark is harmless
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise ConfigFileError(
            f"{path}: not UTF-8 (byte 0x{raw[error.start]:02x} at offset {error.start}); save it as UTF-8 (line {line})"
        ) from None


def _yaml_message(path: Path, error: yaml.MarkedYAMLError, loc: tuple | None = None) -> str:
    mark = error.problem_mark or error.context_mark
    at = f" (line {mark.line + 1})" if mark is not None else ""
    path = f"{path}: {_shown_loc(loc)}" if loc else path  # type: ignore[assignment]
    problem = ", ".join(part for part in (error.context, error.problem) if part) or "not valid YAML"
    if isinstance(error, yaml.constructor.ConstructorError) and "could not determine a constructor" in problem:
        tag = problem.split("tag", 1)[-1].strip(" '").replace("tag:yaml.org,2002:", "!!")
        return (
            f"{path}: tag {clip(tag, 60)!r} is not allowed; a configuration holds plain YAML data "
            f"(mappings, lists, strings, numbers, booleans){at}"
        )
    return f"{path}: not valid YAML: {clip(problem)}{at}"


def _check_budget(
    root: Node, path: Path, lines: dict[tuple, int], node_locs: dict[int, tuple], mark_locs: dict[int, tuple]
) -> None:
    """Refuse alias expansions, nesting and size beyond the budgets; record each value's line.

    Walks the node graph as the schema will see it (aliases expanded), memoising the size and
    height of shared nodes so a bomb costs linear time to detect. A cycle (`&a [*a]`) has no
    finite height and is caught by the depth bound.
    """
    sizes: dict[int, tuple[int, int]] = {}
    total = 0

    def visit(node: Node, loc: tuple, depth: int) -> tuple[int, int]:
        nonlocal total
        if depth > MAX_DEPTH:
            raise ConfigFileError(
                f"{path}: {_shown_loc(loc)}: nested deeper than {MAX_DEPTH} levels (or an alias that refers to "
                f"itself); a configuration needs far fewer (line {node.start_mark.line + 1})"
            )
        if len(lines) < MAX_NODES:
            lines.setdefault(loc, node.start_mark.line + 1)
            node_locs.setdefault(id(node), loc)
            if len(loc) >= len(mark_locs.get(node.start_mark.index, ())):
                mark_locs[node.start_mark.index] = loc
        known = sizes.get(id(node))
        if known is not None:
            size, height = known
            if depth + height > MAX_DEPTH:
                line = node.start_mark.line + 1
                raise ConfigFileError(f"{path}: {_shown_loc(loc)}: nested deeper than {MAX_DEPTH} levels (line {line})")
            total += size
            _check_total(total, path, node, loc)
            return known
        size, height = 1, 1
        if isinstance(node, SequenceNode):
            for index, child in enumerate(node.value):
                child_size, child_height = visit(child, (*loc, index), depth + 1)
                size, height = size + child_size, max(height, child_height + 1)
        elif isinstance(node, MappingNode):
            for key, value in node.value:
                key_loc = loc if key.tag == MERGE_TAG else (*loc, key.value if isinstance(key, ScalarNode) else "?")
                for child, child_loc in ((key, loc), (value, key_loc)):
                    child_size, child_height = visit(child, child_loc, depth + 1)
                    size, height = size + child_size, max(height, child_height + 1)
        else:
            total += 1
            _check_total(total, path, node, loc)
        sizes[id(node)] = (size, height)
        return size, height

    visit(root, (), 1)


def _shown_loc(loc: tuple | None) -> str:
    """('endpoints', 0, 'name') -> 'endpoints[0].name' (keys that are not plain words are quoted); '<root>' for
    the top level; at most 80 characters."""
    text = ""
    for part in loc or ():
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            key = str(part) if str(part).replace("_", "").replace("-", "").isalnum() else repr(clip(str(part), 40))
            text += f".{key}" if text else key
    return clip(text, 80) if text else "<root>"


def _check_total(total: int, path: Path, node: Node, loc: tuple) -> None:
    if total > MAX_NODES:
        raise ConfigFileError(
            f"{path}: {_shown_loc(loc)}: more than {MAX_NODES} values once aliases are expanded; a configuration "
            f"needs far fewer (an alias bomb?) (line {node.start_mark.line + 1})"
        )


# YAML 1.1 number forms that YAML 1.2 (and a reader of the file) takes for something else: `017` is octal 15,
# `1:30` is sexagesimal 90, `0x1F` and `0b101` are hex and binary (YAML 1.1 int and float types,
# yaml.org/type/int.html and float.html; YAML 1.2's core schema reads only decimal, 0o and 0x, and `017` as 17).
# The reader keeps them as the text they are, so a number field refuses them with its name.
_REINTERPRETED_NUMBER = re.compile(
    r"^[-+]?(?:0_*[0-7][0-7_]*|0x_*[0-9a-fA-F][0-9a-fA-F_]*|0b_*[01][01_]*|[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?)$"
)


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys, too many aliases and deep nesting while composing."""

    def __init__(self, text: str, path: Path) -> None:
        super().__init__(text)
        self._path = path
        self._depth = 0
        self._aliases = 0
        self.node_locs: dict[int, tuple] = {}  # id(node) -> its field path, filled by _check_budget
        self.mark_locs: dict[int, tuple] = {}  # a node's start offset in the text -> its field path

    def compose_node(self, parent: Node | None, index: object) -> Node | None:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                line = self.peek_event().start_mark.line + 1
                raise ConfigFileError(f"{self._path}: more than {MAX_ALIASES} aliases; use fewer (line {line})")
        self._depth += 1
        if self._depth > MAX_DEPTH:
            line = self.peek_event().start_mark.line + 1
            raise ConfigFileError(
                f"{self._path}: nested deeper than {MAX_DEPTH} levels; a configuration needs far fewer (line {line})"
            )
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node: Node, deep: bool = False) -> object:
        """A scalar its tag's constructor cannot read is refused with its field and line: an impossible unquoted
        date (`2024-02-30` is YAML's timestamp type), `!!int abc`, `!!bool maybe`, `0x_` (PyYAML's constructors
        raise plain ValueError, KeyError, ... for those). `!!null` on a value is refused, not read as null."""
        if isinstance(node, ScalarNode) and node.tag == NULL_TAG and node.value not in NULL_SPELLINGS:
            self._refuse(node, f"{clip(node.value, 60)!r} is tagged !!null but is not null; remove the tag")
        try:
            return super().construct_object(node, deep=deep)
        except (yaml.YAMLError, ConfigFileError, RecursionError):
            raise
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError) as error:
            value = clip(str(node.value), 60) if isinstance(node, ScalarNode) else "this value"
            if node.tag == TIMESTAMP_TAG:
                why = "no such date or time" if isinstance(error, AttributeError) else clip(str(error), 80)
                self._refuse(node, f"{value!r} reads as a YAML date but is not one ({why}); quote it if it is text")
            tag = node.tag.replace("tag:yaml.org,2002:", "!!")
            self._refuse(node, f"{value!r} cannot be read as {tag} ({clip(str(error), 80)}); quote it if it is text")

    def construct_yaml_int(self, node: ScalarNode) -> int | str:  # type: ignore[override]
        """`017`, `1:30`, `0x1F`, `0b101` stay text (_REINTERPRETED_NUMBER); other ints as SafeLoader reads them."""
        value = str(node.value)
        if _REINTERPRETED_NUMBER.match(value):
            return value
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node: ScalarNode) -> float | str:  # type: ignore[override]
        """`1:30.5` (sexagesimal 90.5) stays text; other floats as SafeLoader reads them."""
        value = str(node.value)
        if _REINTERPRETED_NUMBER.match(value):
            return value
        return super().construct_yaml_float(node)

    def _refuse(self, node: Node, problem: str) -> None:
        loc = self.node_locs.get(id(node))
        field = f"{_shown_loc(loc)}: " if loc else ""
        raise ConfigFileError(f"{self._path}: {field}{problem} (line {node.start_mark.line + 1})")

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict:
        if isinstance(node, MappingNode):
            seen: dict[object, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == MERGE_TAG:
                    continue  # `<<: *defaults`: explicit keys may override merged ones (YAML merge keys)
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:
                    continue  # unhashable key: SafeConstructor refuses it with its own message
                line = key_node.start_mark.line + 1
                if first is not None:
                    raise ConfigFileError(
                        f"{self._path}: key {clip(str(key), 60)!r} appears twice in one mapping (first on line "
                        f"{first}); remove one (line {line})"
                    )
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_yaml_int)
_BoundedLoader.add_constructor("tag:yaml.org,2002:float", _BoundedLoader.construct_yaml_float)
