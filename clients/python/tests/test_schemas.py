"""The client held to the protocol's schemas (``treefork schema``, generated
from the daemon's verb table): every request the client sends names a verb and
only that verb's request properties; every dataclass that maps a verb's
response names only properties of that response, and holds every property the
response requires (unless listed as ignored here).

Every verb's answer is typed: a mapped path that does not reach an object
schema fails the check.
"""

import ast
import dataclasses
import json
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

import treefork
from treefork import types as t

from conftest import tf_bin

SRC = Path(treefork.__file__).resolve().parent

#: dataclass -> (verb, path to the object inside the response, fields that are
#: not response properties (derived or renamed), required properties the class
#: leaves in ``raw``). A path step is a property name, or ``[]`` for the items of
#: an array.
RESPONSES: List[Tuple[type, str, Tuple[str, ...], Tuple[str, ...], Tuple[str, ...]]] = [
    (t.Status, "status", (), (), ()),
    # One class for status changes and `diff --stat` entries: the line counts are
    # the stat's.
    (t.Change, "status", ("changes", "[]"), ("added", "removed", "binary"), ()),
    (t.Diff, "diff", (), (), ()),
    (t.Checkpoint, "checkpoint", ("checkpoint",), ("short",), ()),
    # `show` answers one of two shapes: `|Name` picks the alternative named Name.
    (t.ShowResult, "show", ("|ShownCheckpoint",), (), ()),
    (t.DirEntry, "show", ("|ShownPath", "entries", "[]"), (), ()),
    # `data` comes from the `data` events, not the response.
    (t.FileContent, "show", ("|ShownPath",), ("data",), ()),
    (t.BranchInfo, "branches", ("branches", "[]"), (), ()),
    (t.ForkResult, "fork", (), (), ()),
    (t.CheckoutResult, "checkout", (), (), ()),
    (t.Saved, "checkout", ("saved",), (), ()),
    (t.RestoreResult, "restore", (), (), ()),
    (t.UndoResult, "undo", (), (), ()),
    (t.UndoResult, "redo", (), (), ()),
    (t.UndoResult, "op_restore", (), (), ()),
    # The record's format version and its session (the one asked) stay in `raw`.
    (t.Operation, "op_log", ("operations", "[]"), (), ("version", "session")),
    (t.Comparison, "experiment_end", (), (), ()),
    (t.Comparison, "experiment_show", (), (), ()),
    (t.RunOutcome, "experiment_end", ("runs", "[]"), (), ()),
    (t.AdoptResult, "experiment_adopt", (), (), ()),
    # `patch` is also read from `patch_base64`.
    (t.PromoteResult, "promote", (), (), ()),
    (t.PromoteChange, "promote", ("changes", "[]"), (), ()),
    (t.Message, "messages", ("messages", "[]"), (), ()),
    (t.MergeResult, "merge", (), (), ()),
    (t.MergeResult, "cherry_pick", (), (), ()),
    (t.MergeResult, "revert", (), (), ()),
    (t.MergeResult, "rebase", (), (), ()),
    (t.MergeConflict, "merge", ("conflicts", "[]"), (), ()),
    (t.Change, "merge", ("changes", "[]"), ("added", "removed", "binary"), ()),
    (t.Saved, "merge", ("saved",), (), ()),
    # `dropped` is `conversation.dropped`.
    (t.RewindResult, "rewind", (), ("dropped",), ("conversation",)),
]


@pytest.fixture(scope="module")
def verbs() -> Dict[str, Dict[str, Any]]:
    p = subprocess.run([tf_bin(), "--json", "schema"], capture_output=True, text=True, check=True)
    doc = json.loads(p.stdout)
    return {v["name"]: v for v in doc["verbs"]}


def resolve(root: Dict[str, Any], s: Any) -> Any:
    """``s`` with ``$ref`` (into ``root``'s ``$defs``) and a nullable ``anyOf``
    followed."""
    for _ in range(32):
        if not isinstance(s, dict):
            return s
        if "$ref" in s:
            ref = s["$ref"]
            assert ref.startswith("#/"), ref
            s = root
            for part in ref[2:].split("/"):
                s = s[part]
            continue
        alts = [a for a in s.get("anyOf", s.get("oneOf", [])) if isinstance(a, dict) and a.get("type") != "null"]
        if "properties" not in s and "items" not in s and len(alts) == 1:
            s = alts[0]
            continue
        return s
    raise AssertionError("$ref cycle")


def at(schema: Dict[str, Any], path: Tuple[str, ...]) -> Optional[Dict[str, Any]]:
    """The schema at ``path``, or ``None`` where it is not typed."""
    s = resolve(schema, schema)
    for step in path:
        if not isinstance(s, dict):
            return None
        if step.startswith("|"):
            alts = s.get("anyOf", s.get("oneOf", []))
            named = [a for a in alts if isinstance(a, dict) and a.get("$ref", "").endswith("/" + step[1:])]
            assert len(named) == 1, f"no alternative {step[1:]!r} in {alts}"
            s = resolve(schema, named[0])
        elif step == "[]":
            s = resolve(schema, s.get("items"))
        elif "properties" in s:
            assert step in s["properties"], f"no property {step!r} in {sorted(s['properties'])}"
            s = resolve(schema, s["properties"][step])
        else:
            return None
    return s if isinstance(s, dict) and "properties" in s else None


def fields(cls: type) -> List[str]:
    return [f.name for f in dataclasses.fields(cls) if f.name not in ("raw", "record")]


def mismatches(cls: type, schema: Dict[str, Any], derived: Tuple[str, ...], ignored: Tuple[str, ...]) -> List[str]:
    """What does not match between ``cls`` and a typed object ``schema``."""
    props = schema["properties"]
    own = fields(cls)
    out = [f"derived field {d!r} is not a field" for d in derived if d not in own]
    out += [f"field {f!r} is not a property (properties: {sorted(props)})" for f in own if f not in props and f not in derived]
    out += [f"required property {r!r} is not a field" for r in schema.get("required", []) if r not in own and r not in ignored]
    return out


@pytest.mark.parametrize("cls,verb,path,derived,ignored", RESPONSES, ids=lambda x: getattr(x, "__name__", None))
def test_dataclass_matches_response(verbs, cls, verb, path, derived, ignored) -> None:
    assert verb in verbs, f"{cls.__name__} maps to {verb!r}, which is not a verb"
    schema = at(verbs[verb]["response"], path)
    # Every verb's answer is typed: a path that is not a typed object is an error.
    assert schema is not None, f"{verb}'s response at {path} is not a typed object"
    bad = mismatches(cls, schema, derived, ignored)
    assert not bad, f"{cls.__name__} against {verb}'s response {path}: {bad}"


def test_the_field_check_reads_typed_schemas() -> None:
    """The check above on a typed schema of the shape schemars writes (``$defs``,
    ``$ref``, nullable ``anyOf``): it passes on a match and names each mismatch."""
    root = {
        "type": "object",
        "properties": {"saved": {"anyOf": [{"$ref": "#/$defs/Saved"}, {"type": "null"}]}},
        "$defs": {
            "Saved": {
                "type": "object",
                "properties": {"checkpoint": {"type": "string"}, "ref": {"type": "string"}, "at": {"type": "integer"}},
                "required": ["checkpoint", "at"],
            }
        },
    }
    schema = at(root, ("saved",))
    assert schema is not None
    assert mismatches(t.Saved, schema, (), ("at",)) == []
    assert mismatches(t.Saved, schema, (), ()) == ["required property 'at' is not a field"]
    del schema["properties"]["ref"]
    assert len(mismatches(t.Saved, schema, (), ("at",))) == 1
    assert at({"type": "object"}, ()) is None  # untyped: skipped


def _dict_keys(fn: ast.AST, name: str) -> Optional[List[str]]:
    """The keys of ``name = {...}`` and ``name["k"] = ...`` in function ``fn``."""
    keys: Optional[List[str]] = None
    for node in ast.walk(fn):
        target = value = None
        if isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        if isinstance(target, ast.Name) and target.id == name and isinstance(value, ast.Dict):
            keys = (keys or []) + [k.value for k in value.keys if isinstance(k, ast.Constant)]
        if (
            isinstance(target, ast.Subscript)
            and isinstance(target.value, ast.Name)
            and target.value.id == name
            and isinstance(target.slice, ast.Constant)
        ):
            keys = (keys or []) + [target.slice.value]
    return keys


def requests() -> List[Tuple[str, int, str, List[str]]]:
    """Every ``self._call("op", ...)`` / ``conn.call("op", ...)`` of the client:
    (file, line, op, argument names)."""
    out = []
    for path in sorted(SRC.glob("*.py")):
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                    continue
                if node.func.attr not in ("_call", "call") or not node.args:
                    continue
                op = node.args[0]
                if not (isinstance(op, ast.Constant) and isinstance(op.value, str)):
                    continue
                names: List[str] = []
                for kw in node.keywords:
                    if kw.arg is not None:
                        names.append(kw.arg)
                    else:
                        assert isinstance(kw.value, ast.Name), f"{path.name}:{node.lineno}: ** of an expression"
                        keys = _dict_keys(fn, kw.value.id)
                        assert keys is not None, f"{path.name}:{node.lineno}: cannot see the keys of **{kw.value.id}"
                        names += keys
                out.append((path.name, node.lineno, op.value, names))
    return out


def test_requests_use_verbs_and_their_arguments(verbs) -> None:
    found = requests()
    ops = {op for _, _, op, _ in found}
    # The scan sees the client's calls (a scan that found nothing would pass).
    assert {"ping", "status", "checkout", "exec_begin", "message_append", "promote", "merge", "cherry_pick", "rebase", "revert"} <= ops, ops
    for file, line, op, names in found:
        assert op in verbs, f"{file}:{line}: op {op!r} is not a verb"
        props = resolve(verbs[op]["request"], verbs[op]["request"]).get("properties", {})
        bad = [n for n in names if n not in props]
        assert not bad, f"{file}:{line}: {op} has no request properties {bad} (it has {sorted(props)})"
