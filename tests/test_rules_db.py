"""Loading rule files: validation errors with places, user rules, overrides."""

from __future__ import annotations

import textwrap

import pytest

from rules_cases import MATMUL, USER_RULES, op, write_rules as write
from sdy_dl.errors import SdyError
from sdy_dl.ir import parse_module_text
from sdy_dl.rules.db import RULES_ENV, load_rule_db, rule_sources
from sdy_dl.resources import rules_dir

def rule_of(text: str, db, name: str):
    module = parse_module_text(text, "<test>")
    target = [o for o in module.ops if o.name == name][0]
    return db.rule_for(target, module)


def test_shipped_rules_load_and_cover_the_registry():
    db = load_rule_db()
    names = {c.name for c in db.ops()}
    assert {"stablehlo.dot_general", "stablehlo.reshape", "sdy.sharding_constraint",
            "@Eigh", "@X64Combine", "@xla.debug.Log", "stablehlo.while"} <= names
    files = {c.file for c in db.ops()}
    assert all(f.startswith(str(rules_dir())) for f in files)
    assert all(c.doc and "\n" not in c.doc for c in db.ops())


def test_unknown_custom_call_and_unknown_op_have_no_rule():
    db = load_rule_db()
    assert rule_of(MATMUL, db, "stablehlo.custom_call") is None
    text = op(["tensor<4xf32>"], ["tensor<4xf32>"],
              '"stablehlo.map"(%arg0) ({\n  ^bb0(%a: tensor<f32>):\n'
              "    stablehlo.return %a : tensor<f32>\n  }) {dimensions = array<i64: 0>} : "
              "(tensor<4xf32>) -> tensor<4xf32>")
    assert rule_of(text, db, "stablehlo.map") is None


def test_user_rule_for_a_custom_call(tmp_path):
    db = load_rule_db([write(tmp_path, USER_RULES)])
    assert rule_of(MATMUL, db, "stablehlo.custom_call").to_text() == (
        "#sdy.op_sharding_rule<([i, j, k], [k, l])->([i, j, l]) {i=2, j=8, k=16, l=32} "
        "reduction={k}>")
    assert "@my_matmul" in {c.name for c in db.ops()}


def test_rules_from_the_environment(tmp_path, monkeypatch):
    folder = tmp_path / "more"
    folder.mkdir()
    write(folder, USER_RULES)
    monkeypatch.setenv(RULES_ENV, str(folder))
    assert str(folder / "user.yaml") in map(str, rule_sources())
    assert rule_of(MATMUL, load_rule_db(), "stablehlo.custom_call") is not None


def test_later_files_override_earlier_ones(tmp_path, monkeypatch):
    first = write(tmp_path, USER_RULES, "first.yaml")
    second = write(tmp_path, """\
        description: Overrides.
        custom_calls:
          my_matmul:
            doc: Treat it as opaque.
            no_rule: true
        ops:
          stablehlo.tanh:
            doc: Pretend tanh needs replication.
            use: pointwise
            with:
              kinds: "[need_replication] * results[0].rank"
        """, "second.yaml")
    monkeypatch.setenv(RULES_ENV, first)
    db = load_rule_db([second])
    assert rule_of(MATMUL, db, "stablehlo.custom_call") is None
    tanh = op(["tensor<4x2xf32>"], ["tensor<4x2xf32>"], "stablehlo.tanh %arg0 : tensor<4x2xf32>")
    assert rule_of(tanh, db, "stablehlo.tanh").to_text() == (
        "#sdy.op_sharding_rule<([i, j])->([i, j]) {i=4, j=2} need_replication={i, j}>")
    assert next(c for c in db.ops() if c.name == "stablehlo.tanh").file == second


def test_an_ops_own_rule_wins(tmp_path):
    text = op(["tensor<6x2xf32>"], ["tensor<2x6xf32>"],
              "stablehlo.custom_call @my_matmul(%arg0) {sdy.sharding_rule = "
              "#sdy.op_sharding_rule<([i, j])->([j, i]) {i=6, j=2}, custom>} : "
              "(tensor<6x2xf32>) -> tensor<2x6xf32>")
    rule = rule_of(text, load_rule_db([write(tmp_path, USER_RULES)]), "stablehlo.custom_call")
    assert rule.is_custom and rule.to_text().endswith(", custom>")


def test_templates_and_generators_in_user_files(tmp_path):
    path = write(tmp_path, """\
        description: A custom call that reshapes, and one built from a template.
        templates:
          first_dim_only:
            doc: One factor on dim 0 of everything.
            params: {kind_: need_replication}
            factors:
              - size: results[0].shape[0]
                kind: kind_
                dims: {all: 0}
        custom_calls:
          my_reshape: {doc: Like stablehlo.reshape., generator: reshape}
          my_first: {doc: Only dim 0., use: first_dim_only, with: {kind_: permutation}}
        """)
    db = load_rule_db([path])
    text = op(["tensor<8x6xf32>"], ["tensor<2x24xf32>"],
              "stablehlo.custom_call @my_reshape(%arg0) : (tensor<8x6xf32>) -> tensor<2x24xf32>")
    assert rule_of(text, db, "stablehlo.custom_call").to_text() == (
        "#sdy.op_sharding_rule<([ij, k])->([i, jk]) {i=2, j=4, k=6}>")
    text = text.replace("my_reshape", "my_first").replace("2x24", "8x6")
    assert rule_of(text, db, "stablehlo.custom_call").to_text() == (
        "#sdy.op_sharding_rule<([i, j])->([i, k]) {i=8, j=1, k=1} permutation={i}>")


BAD_FILES = [
    # (YAML, line of the error, words in the message)
    ("""\
     description: x
     ops:
       stablehlo.transpose:
         doc: Transposes.
         factors:
           - for: r, i in enumerate(attr.perm)
             size: operand.shape[i]
             dims: {operand: i, results: r}
     """, 6, "unknown op attribute 'perm' of stablehlo.transpose"),
    ("""\
     description: x
     custom_calls:
       f:
         doc: F.
         einsum: "([a])->([a]) reduction={b}"
     """, 5, "factor 'b' is used in reduction"),
    ("""\
     description: x
     ops:
       stablehlo.reshape: {doc: R., generator: reshapes}
     """, 3, "unknown generator 'reshapes'"),
    ("""\
     description: x
     ops:
       stablehlo.negate:
         doc: N.
         factors:
           - for: d in range(results[0].rank)
             size: results[0].shape[d]
             kind: reduce
             dims: {all: d}
     """, 8, "bad kind 'reduce'"),
    ("""\
     description: x
     custom_calls:
       f:
         doc: F.
         einsum: "([a]->([a])"
     """, 5, "malformed rule"),
    ("""\
     description: x
     ops:
       stablehlo.negate: {doc: N., use: pointwize}
     """, 3, "unknown template 'pointwize'"),
    ("""\
     description: x
     ops:
       stablehlo.negate:
         doc: N.
         factors:
           - size: results[0].shape[dd]
             dims: {all: 0}
     """, 6, "unknown name 'dd'"),
    ("""\
     description: x
     ops:
       stablehlo.negate:
         doc: N.
         factor:
           - size: 1
     """, 5, "unknown field 'factor'"),
    ("""\
     description: x
     ops:
       stablehlo.negate:
         use: pointwise
     """, 3, "needs a one-line 'doc'"),
    ("""\
     description: x
     ops:
       stablehlo.negate: {doc: N., use: pointwise}
       stablehlo.negate: {doc: N., use: pointwise}
     """, 4, "duplicate key 'stablehlo.negate'"),
    ("""\
     description: x
     ops:
       stablehlo.negate: {doc: N., use: pointwise
     """, 4, "invalid YAML"),
    ("""\
     description: x
     ops:
       stablehlo.add:
         doc: A.
         factors:
           - size: 2
             dims: {lhs: 0, operand: 0}
     """, 7, "unknown operand group 'operand' of stablehlo.add"),
    ("""\
     description: x
     ops:
       stablehlo.add:
         doc: A.
         factors:
           - size: 2 +
             dims: {all: 0}
     """, 6, "malformed expression"),
    ("""\
     description: x
     ops:
       stablehlo.add:
         doc: A.
         factors:
           - size: results[0].__class__
             dims: {all: 0}
     """, 6, "field '__class__' is not allowed"),
    ("""\
     description: x
     ops:
       stablehlo.add:
         doc: A.
         factors:
           - size: __import__('os')
             dims: {all: 0}
     """, 6, "unknown function '__import__'"),
    ("""\
     description: x
     ops:
       stablehlo.add:
         doc: A.
         factors:
           - size: 2
     """, 6, "needs 'dims'"),
]


@pytest.mark.parametrize("text, line, message", BAD_FILES,
                         ids=[m for _, _, m in BAD_FILES])
def test_invalid_rule_files_name_file_and_line(tmp_path, text, line, message):
    path = write(tmp_path, text, "bad.yaml")
    with pytest.raises(SdyError) as info:
        load_rule_db([path])
    err = info.value
    assert err.file == path and err.line == line, str(err)
    assert message in err.message
    assert str(err).startswith(f"{path}:{line}:")


def test_size_mismatch_at_instantiation_names_the_rule(tmp_path):
    path = write(tmp_path, """\
        description: x
        custom_calls:
          my_matmul:
            doc: Wrong contraction size.
            einsum: ([b, s, h], [h, f]) -> ([b, s, f]) {h=4} reduction={h}
        """)
    with pytest.raises(SdyError) as info:
        rule_of(MATMUL, load_rule_db([path]), "stablehlo.custom_call")
    assert info.value.file == path and info.value.line == 3
    assert "size mismatch" in info.value.message and "stablehlo.custom_call" in info.value.message


def test_runtime_error_in_a_template_names_the_expression(tmp_path):
    path = write(tmp_path, """\
        description: x
        custom_calls:
          broken:
            doc: Indexes past the shape.
            factors:
              - size: results[0].shape[5]
                dims: {all: 0}
        """)
    text = op(["tensor<4xf32>"], ["tensor<4xf32>"],
              "stablehlo.custom_call @broken(%arg0) : (tensor<4xf32>) -> tensor<4xf32>")
    with pytest.raises(SdyError) as info:
        rule_of(text, load_rule_db([path]), "stablehlo.custom_call")
    assert info.value.file == path and info.value.line == 6
    assert "results[0].shape[5]" in info.value.message


def test_missing_rule_file(tmp_path):
    with pytest.raises(SdyError, match="rule file not found"):
        load_rule_db([str(tmp_path / "nope.yaml")])


def test_parsed_rule_files_are_cached_and_a_damaged_entry_is_parsed_again(tmp_path, monkeypatch):
    from sdy_dl.rules import db as rules_db

    monkeypatch.setenv("SDY_DL_CACHE", str(tmp_path / "cache"))
    rules_db._parsed_db.cache_clear()
    first = load_rule_db([write(tmp_path, USER_RULES)])
    entries = list((tmp_path / "cache" / "rules").iterdir())
    assert len(entries) == 1
    rules_db._parsed_db.cache_clear()
    again = load_rule_db([write(tmp_path, USER_RULES)])   # read from the cache
    assert [(e.key, e.loc) for e in again.entries()] == [(e.key, e.loc) for e in first.entries()]
    entries[0].write_bytes(b"not a pickle")
    rules_db._parsed_db.cache_clear()
    mended = load_rule_db([write(tmp_path, USER_RULES)])
    assert [e.key for e in mended.entries()] == [e.key for e in first.entries()]
    rules_db._parsed_db.cache_clear()


def test_an_invalid_rule_file_is_not_cached(tmp_path, monkeypatch):
    from sdy_dl.rules import db as rules_db

    monkeypatch.setenv("SDY_DL_CACHE", str(tmp_path / "cache"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("ops:\n  stablehlo.add:\n    doc: x\n    factors: [\n")
    for _ in range(2):   # the error every time, never a cache entry
        with pytest.raises(SdyError) as e:
            load_rule_db([str(bad)])
        assert str(bad) in str(e.value)
    assert not (tmp_path / "cache" / "rules").exists()


def test_a_cold_cache_validates_once_and_builds_the_directory_once(tmp_path, monkeypatch):
    """Loading with an empty cache validates the files in one explicit step and
    builds the directory of entries once; a warm cache does neither."""
    from sdy_dl.rules import db as rules_db

    monkeypatch.setenv("SDY_DL_CACHE", str(tmp_path / "cache"))
    calls = {"validate": 0, "directory": 0}

    def counted(name, f):
        def call(*args):
            calls[name] += 1
            return f(*args)
        return call

    monkeypatch.setattr(rules_db, "validate_rule_files",
                        counted("validate", rules_db.validate_rule_files))
    monkeypatch.setattr(rules_db, "rule_directory", counted("directory", rules_db.rule_directory))
    rules = write(tmp_path, USER_RULES)
    rules_db._parsed_db.cache_clear()
    cold = load_rule_db([rules])
    assert calls == {"validate": 1, "directory": 1}
    rules_db._parsed_db.cache_clear()
    warm = load_rule_db([rules])
    assert calls == {"validate": 1, "directory": 1}
    assert warm.directory == cold.directory
    rules_db._parsed_db.cache_clear()


def test_only_the_entries_in_effect_are_validated(tmp_path):
    """An invalid entry a later file overrides is never checked; the one in effect is."""
    from sdy_dl.rules.db import validate_rule_files
    from sdy_dl.rules.schema import parse_rule_file

    bad = """\
        description: An invalid entry.
        ops:
          stablehlo.tanh:
            doc: Names an unknown template.
            use: no_such_template
        """
    good = """\
        description: The entry in effect.
        ops:
          stablehlo.tanh:
            doc: Elementwise.
            use: pointwise
        """
    shipped = [parse_rule_file(path.read_text(), str(path))
               for path in sorted(rules_dir().glob("*.yaml"))]
    files = [parse_rule_file(textwrap.dedent(text), name)
             for text, name in ((bad, "bad.yaml"), (good, "good.yaml"))]
    validate_rule_files(shipped + files)
    with pytest.raises(SdyError, match="no_such_template"):
        validate_rule_files(shipped + files[::-1])


def test_the_signature_of_a_deeply_nested_op_is_read_without_recursion():
    """An op's signature holds the structure of every op nested in it, read by one
    iterative walk: 1500 nested named computations (Python's recursion limit is 1000)."""
    from sdy_dl.ir import parse_module_text
    from sdy_dl.ir.context import mlir_context
    from sdy_dl.rules.db import _signature

    depth, t = 1500, "tensor<8xf32>"
    lines = [f"func.func @main(%arg0: {t}) -> {t} {{"]
    for k in range(depth):
        operand = "%arg0" if k == 0 else f"%x{k - 1}"
        lines.append(f'%r{k} = sdy.named_computation<"n{k}">({operand}) (%x{k}: {t}) {{')
    lines.append(f"sdy.return %x{depth - 1} : {t}")
    for k in reversed(range(depth)):
        lines.append(f"}} : ({t}) -> {t}")
        lines.append(f"sdy.return %r{k} : {t}" if k else f"return %r0 : {t}\n}}")
    module = parse_module_text("\n".join(lines))
    with mlir_context():
        signature = _signature(next(op for op in module.ops if op.parent is not None))
    levels = 0
    while signature[4]:   # (the one nested computation, then its return)
        assert [entry[0] for entry in signature[4]] == ["sdy.named_computation", "sdy.return"] \
            or [entry[0] for entry in signature[4]] == ["sdy.return"]
        levels += 1
        signature = (None,) * 3 + signature[4][0][3] if len(signature[4]) == 2 else (None,) * 5
    assert levels == depth


def test_rule_instances_are_kept_for_later_processes(tmp_path, monkeypatch):
    """A rule instantiated once is kept in the cache (``save_rule_instances``) and
    read back by a later process, equal to the one instantiated; rule files
    with other contents do not see it."""
    import sdy_dl.rules.db as db_module

    monkeypatch.setenv("SDY_DL_CACHE", str(tmp_path / "cache"))
    rules = write(tmp_path, USER_RULES)
    module = parse_module_text(MATMUL, "<test>")
    ops = [o for o in module.ops if o.name == "stablehlo.custom_call"]
    made = [load_rule_db([rules]).rule_for(o, module) for o in ops]
    assert made[0].to_text().endswith("reduction={k}>")
    db_module.save_rule_instances()

    db_module._parsed_db.cache_clear()   # (as a new process would start)

    def no_instantiation(*args):
        raise AssertionError("instantiated again")
    monkeypatch.setattr(db_module, "instantiate", no_instantiation)
    assert [load_rule_db([rules]).rule_for(o, module) for o in ops] == made

    write(tmp_path, USER_RULES.replace("reduction={h}", ""))   # (other contents, same path)
    db_module._parsed_db.cache_clear()
    with pytest.raises(AssertionError, match="instantiated again"):
        load_rule_db([rules]).rule_for(ops[0], module)
    db_module._parsed_db.cache_clear()


def test_rule_instance_store_keeps_the_last_used(tmp_path, monkeypatch):
    """A store over its limit keeps the instances the saving process used (a later
    process reads the whole store)."""
    from sdy_dl.rules.db import InstanceStore

    monkeypatch.setenv("SDY_DL_CACHE", str(tmp_path))
    monkeypatch.setattr(InstanceStore, "LIMIT", 3)
    first = InstanceStore("k")
    assert first.get("a") is not None   # (not kept: the unknown marker)
    for text in "abcd":
        first.add(text, None)
    first.save()
    assert list(InstanceStore("k")._read()) == ["a", "b", "c"]
    second = InstanceStore("k")
    assert second.get("c") is None   # (kept: the op has no rule)
    second.add("e", None)
    second.save()
    assert list(InstanceStore("k")._read()) == ["c", "e", "a"]


def test_the_cached_directory_is_the_one_of_the_parsed_files(tmp_path, monkeypatch):
    """A database read from the cache answers from its directory what one made
    from the parsed files answers: for every entry, no rule, a local rule or one
    reading neighbouring ops, and the same instances."""
    from sdy_dl.rules import db as rules_db

    monkeypatch.setenv("SDY_DL_CACHE", str(tmp_path / "cache"))
    rules = write(tmp_path, USER_RULES)
    rules_db._parsed_db.cache_clear()
    load_rule_db([rules])   # (fills the cache)
    rules_db._parsed_db.cache_clear()
    cached = load_rule_db([rules])
    assert "files" not in vars(cached)   # (nothing read yet)
    made = rules_db.RuleDB(cached.files)
    assert cached.directory == made.directory
    kinds = {kind for section in made.directory.values() for kind in section.values()}
    assert kinds == {rules_db.NO_RULE, rules_db.LOCAL, rules_db.NEIGHBOURS}
    assert made.directory["custom_calls"]["my_matmul"] == rules_db.LOCAL
    assert rule_of(MATMUL, cached, "stablehlo.custom_call") == \
        rule_of(MATMUL, made, "stablehlo.custom_call")
    rules_db._parsed_db.cache_clear()


def test_a_process_with_every_rule_kept_loads_no_rule_language(tmp_path):
    """A propagation whose ops' rules are all kept in the cache reads neither the
    parsed rule files nor the modules of the rule language; one that meets a new
    op signature reads them and instantiates its rule."""
    import os
    import subprocess
    import sys

    from rules_cases import op as module_with

    env = {**os.environ, "SDY_DL_CACHE": str(tmp_path / "cache")}
    program = """if True:
        import sys
        from sdy_dl.ir import parse_module_text
        from sdy_dl.pipeline import make_options, propagate
        module = parse_module_text(open(sys.argv[1]).read(), sys.argv[1])
        propagate(module, make_options({}, engine="python"))
        print(sorted(m for m in sys.modules if m.startswith("sdy_dl.rules.")))
    """

    def loaded(text: str) -> list[str]:
        path = tmp_path / "in.mlir"
        path.write_text(text)
        done = subprocess.run([sys.executable, "-c", program, str(path)], env=env,
                              capture_output=True, text=True, check=True)
        return eval(done.stdout)

    add = module_with(["tensor<8x16xf32>"], ["tensor<8x16xf32>"],
                      "stablehlo.add %arg0, %arg0 : tensor<8x16xf32>")
    language = {"sdy_dl.rules.schema", "sdy_dl.rules.interp", "sdy_dl.rules.expr"}
    assert language <= set(loaded(add))            # (a cold cache: instantiated)
    assert not language & set(loaded(add))         # (every rule kept)
    negate = add.replace("stablehlo.add %arg0, %arg0", "stablehlo.negate %arg0")
    assert language <= set(loaded(negate))         # (a new signature)


def test_a_rule_file_edited_in_place_is_read_again_from_a_warm_cache(tmp_path, monkeypatch):
    """The cached directory and instances are those of the files' contents: the same
    path with a rule replaced by ``no_rule`` answers no rule in a later process."""
    from sdy_dl.rules import db as rules_db

    monkeypatch.setenv("SDY_DL_CACHE", str(tmp_path / "cache"))
    rules = write(tmp_path, USER_RULES)
    rules_db._parsed_db.cache_clear()
    assert rule_of(MATMUL, load_rule_db([rules]), "stablehlo.custom_call") is not None
    rules_db.save_rule_instances()
    write(tmp_path, USER_RULES.replace(
        "    einsum: ([b, s, h], [h, f]) -> ([b, s, f]) reduction={h}\n", "    no_rule: true\n"))
    rules_db._parsed_db.cache_clear()   # (as a new process would start)
    edited = load_rule_db([rules])
    assert edited.directory["custom_calls"]["my_matmul"] == rules_db.NO_RULE
    assert rule_of(MATMUL, edited, "stablehlo.custom_call") is None
    rules_db._parsed_db.cache_clear()
