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
"""

from sdy_dl.rules.db import RuleDB, load_rule_db
from sdy_dl.rules.instance import FACTOR_KINDS, Factor, RuleInstance, factor_name
from sdy_dl.rules.notation import parse_rule_text

__all__ = ["FACTOR_KINDS", "Factor", "RuleDB", "RuleInstance", "factor_name", "load_rule_db",
           "parse_rule_text"]
