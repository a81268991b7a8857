"""The op sharding rule database: YAML rule files -> one rule per op.

* :mod:`.instance` — :class:`RuleInstance` (factors and tensor mappings), printed
  exactly as Shardy prints ``#sdy.op_sharding_rule``;
* :mod:`.db` — :func:`load_rule_db` (shipped rules, ``$SDY_DL_RULES``, extra
  files) and :meth:`RuleDB.rule_for`;
* :mod:`.schema`, :mod:`.expr`, :mod:`.interp` — the rule language (see
  ``rules/SCHEMA.md``): parsing and validation, expressions, instantiation;
* :mod:`.builder` — Shardy's rule-builder conventions, used by every form;
* :mod:`.generators` — the named generators (reshape, gather, scatter);
* :mod:`.notation` — the textual rule syntax (Shardy's and the einsum form);
* :mod:`.attrs`, :mod:`.view` — the op as rules see it (attributes, tensors);
* :mod:`.annotate` — ``rules annotate``.

The package imports none of its modules: a process whose ops' rules are all
kept in the cache loads only :mod:`.instance` and :mod:`.db`.
"""
