"""Grammar files for adaptor grammars: parsing, validation and the compiled integer form.

A grammar file is plain UTF-8 text, one statement per line. It is topicflow's own format (close to the
``@ Word 1500 100 0`` lines of Zhai's PyAdaGram, but with named fields so ``a`` and ``b`` cannot be
swapped by accident)::

    # a comment (only at the start of a line)
    start Sentence                       # optional; default: the left-hand side of the first rule
    @ Word a=100 b=0 K=1500              # Word is adapted: Pitman-Yor concentration a, discount b,
                                         # truncation K of its TNG (each field optional)
    Sentence -> Words                    # a rule: one or two right-hand-side symbols
    Words -> Word Words alpha=0.5        # optional Dirichlet prior alpha of the rule
    Char -> <any>                        # one rule Char -> 'x' for every terminal x of the data
    Char -> <unquoted>                   # ... for every terminal x of the data the file does not quote
    Doc{j} -> '_{j}' Topic{i}  for j=1..D, i=1..K   # a template: D and K are given when loading

Symbols:

- a bare name (``Word``) is a nonterminal and must have rules of its own;
- a quoted name (``'a'``) is a terminal; terminals are whole tokens of a sentence (a character for word
  segmentation, a pseudo-word such as ``'_3'`` for the topic-model grammar);
- ``<any>`` stands for every terminal of the data (the rules are made when the grammar is bound to an
  alphabet with :meth:`GrammarSpec.bind`); it must be the only right-hand-side symbol of its rule;
- ``<unquoted>`` is the same but leaves out the terminals quoted anywhere in the file: the topic grammar's
  ``Char -> <unquoted>`` spells words from the characters only, not from the D document pseudo-words
  ``'_j'`` (with ``<any>`` Char would get D + |alphabet| rules, and its default prior alpha = 1/|R(Char)|
  would make every character cost about e^-D under the initial G', below the smallest float for D of a
  few hundred).

Fields: ``a`` > -b is the concentration (Zhai's "scale", default 1000 as PyAdaGram), ``0 <= b < 1`` the
discount (default 0), ``K >= 1`` the truncation (default 1000); ``alpha > 0`` a rule's Dirichlet prior,
default ``1 / |R(lhs)|`` as PyAdaGram. ``for v=lo..hi`` repeats the line for every integer v, replacing
``{v}`` in every name; ``hi`` (or ``lo``) may be a parameter name such as ``D``.

Validation ([Z] section 8.1, P6/P7 of the spec) raises :class:`~topicflow.errors.InputError` naming the
file and line: rules are binarized (one or two right-hand-side symbols), no adapted nonterminal reaches
itself through any derivation, no cycle of unary rules between nonterminals, every nonterminal is reachable
from the start symbol and derives at least one terminal string.

Public API (used by the online and MCMC samplers alike):

- :func:`load_grammar` (a shipped name or a file) and :func:`parse_grammar` (a string) return a
  :class:`GrammarSpec` (symbols as strings, terminals of ``<any>`` not yet known);
- :meth:`GrammarSpec.bind` with the data's terminals returns a :class:`Grammar`, the compiled integer
  form: rules as arrays, adapted nonterminals in topological order, :meth:`Grammar.encode` for sentences.
"""
from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from topicflow.errors import InputError

#: Names of the grammars shipped in ``topicflow/data/grammars`` ([Z] Table 8.1).
SHIPPED_GRAMMARS = ("unigram", "collocation", "infvoc-lda")
#: The right-hand side that expands to every terminal of the data.
ANY_TERMINAL = "<any>"
#: Every terminal of the data that the grammar file does not quote.
UNQUOTED_TERMINAL = "<unquoted>"
#: The right-hand-side symbols that expand to terminals of the data when the grammar is bound.
WILDCARDS = (ANY_TERMINAL, UNQUOTED_TERMINAL)
#: Defaults of an ``@`` line (PyAdaGram's defaults: a = 1e3, b = 0, truncation 1000).
DEFAULT_A = 1000.0
DEFAULT_B = 0.0
DEFAULT_TRUNCATION = 1000

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-{}.]*$")
_RANGE = re.compile(r"^([A-Za-z_]\w*)=(\w+)\.\.(\w+)$")


@dataclass(frozen=True, slots=True)
class Rule:
    """One production ``lhs -> rhs`` of a grammar file.

    Parameters
    ----------
    lhs : str
        The left-hand-side nonterminal.
    rhs : tuple of str
        One or two symbols; terminals are kept quoted (``"'a'"``), :data:`ANY_TERMINAL` unexpanded.
    alpha : float or None
        The Dirichlet prior of the rule, or None for the default ``1 / |R(lhs)|``.
    line : int
        The line of the file that declared it (1-based).
    """

    lhs: str
    rhs: tuple[str, ...]
    alpha: float | None
    line: int


@dataclass(frozen=True)
class Adaptor:
    """An ``@`` line: an adapted nonterminal and its Pitman-Yor parameters.

    Parameters
    ----------
    symbol : str
        The adapted nonterminal.
    a : float
        Concentration (Zhai's scale ``a``).
    b : float
        Discount ``b`` in [0, 1).
    truncation : int
        ``K``: the TNG is cut to this many atoms at every pruning.
    line : int
        The line of the file that declared it.
    """

    symbol: str
    a: float
    b: float
    truncation: int
    line: int


def is_terminal(symbol: str) -> bool:
    """Tell whether a right-hand-side symbol of a :class:`Rule` is a quoted terminal.

    Parameters
    ----------
    symbol : str
        A symbol as stored in :attr:`Rule.rhs`.

    Returns
    -------
    bool
    """
    return len(symbol) >= 2 and symbol[0] == "'" and symbol[-1] == "'"


@dataclass(frozen=True)
class GrammarSpec:
    """A parsed and validated grammar file, before its terminals are known.

    Parameters
    ----------
    rules : tuple of Rule
        Every rule, in file order (templates expanded).
    adaptors : tuple of Adaptor
        The adapted nonterminals, in file order.
    start : str
        The start symbol.
    path : str
        The file it was read from (``"<string>"`` for text), for error messages.
    """

    rules: tuple[Rule, ...]
    adaptors: tuple[Adaptor, ...]
    start: str
    path: str = "<string>"

    @property
    def nonterminals(self) -> tuple[str, ...]:
        """Return the nonterminals in order of first appearance as a left-hand side."""
        return tuple(dict.fromkeys(r.lhs for r in self.rules))

    def with_adaptors(self, **truncations: int) -> GrammarSpec:
        """Return a copy with the truncation of some adaptors changed (``Word=1500``).

        Parameters
        ----------
        **truncations : int
            New truncation per adapted nonterminal.

        Returns
        -------
        GrammarSpec
        """
        known = {ad.symbol for ad in self.adaptors}
        for name, value in truncations.items():
            if name not in known:
                raise InputError(f"{self.path}: {name!r} is not an adapted nonterminal of this grammar "
                                 f"(adapted: {', '.join(sorted(known)) or 'none'})", path=self.path)
            if int(value) < 1:
                raise InputError(f"{self.path}: truncation of {name} must be >= 1, got {value}", path=self.path)
        adaptors = tuple(
            Adaptor(ad.symbol, ad.a, ad.b, int(truncations.get(ad.symbol, ad.truncation)), ad.line)
            for ad in self.adaptors)
        return GrammarSpec(self.rules, adaptors, self.start, self.path)

    def terminals(self) -> tuple[str, ...]:
        """Return the explicitly quoted terminals of the file (without their quotes), in order.

        Returns
        -------
        tuple of str
        """
        return self._quoted

    @cached_property
    def _quoted(self) -> tuple[str, ...]:
        out: dict[str, None] = {}
        for rule in self.rules:
            for sym in rule.rhs:
                if is_terminal(sym):
                    out[sym[1:-1]] = None
        return tuple(out)

    def bind(self, terminals: Iterable[str]) -> Grammar:
        """Compile the grammar for data over ``terminals`` (``<any>`` expands to them).

        Parameters
        ----------
        terminals : iterable of str
            The alphabet of the data (each a whole terminal token). The file's quoted terminals are
            added if missing; the order is: the file's terminals first, then the new ones as given.

        Returns
        -------
        Grammar
        """
        alphabet = list(self.terminals())
        seen = set(alphabet)
        for t in terminals:
            if t not in seen:
                seen.add(t)
                alphabet.append(t)
        return _compile(self, tuple(alphabet))


@dataclass(frozen=True, eq=False)
class Grammar:
    """A grammar compiled to integers, bound to an alphabet of terminals.

    Symbols are coded as ints: nonterminal ``c`` is ``c`` (``0 <= c < n_nonterminals``), terminal ``t``
    is ``n_nonterminals + t``. Rules are base PCFG rules R in a fixed order.

    Parameters
    ----------
    nonterminals : tuple of str
        Nonterminal names; index = code.
    terminals : tuple of str
        Terminal tokens; index = terminal id.
    start : int
        Code of the start symbol.
    rule_lhs : ndarray of int64, shape (R,)
        Left-hand side of each rule.
    rule_rhs : ndarray of int64, shape (R, 2)
        Right-hand-side symbol codes; ``rule_rhs[r, 1] == -1`` for a unary rule.
    rule_alpha : ndarray of float64, shape (R,)
        Dirichlet prior of each rule.
    rule_line : ndarray of int64, shape (R,)
        Line of the grammar file that declared each rule.
    adapted : ndarray of int64, shape (M,)
        Adapted nonterminals, specific before general: ``adapted[j]`` is never reachable from
        ``adapted[i]`` when ``j > i`` ([Z] section 8.1.2, the order c_1..c_|M|).
    pitman_yor_a, pitman_yor_b : ndarray of float64, shape (M,)
        Concentration a and discount b of each adapted nonterminal.
    truncation : ndarray of int64, shape (M,)
        K of each adapted nonterminal.
    unary_order : ndarray of int64, shape (n_nonterminals,)
        Nonterminals ordered so that B comes before A for every unary rule A -> B.
    path : str
        Where the grammar came from.
    """

    nonterminals: tuple[str, ...]
    terminals: tuple[str, ...]
    start: int
    rule_lhs: np.ndarray
    rule_rhs: np.ndarray
    rule_alpha: np.ndarray
    rule_line: np.ndarray
    adapted: np.ndarray
    pitman_yor_a: np.ndarray
    pitman_yor_b: np.ndarray
    truncation: np.ndarray
    unary_order: np.ndarray
    path: str = "<string>"
    _terminal_index: dict[str, int] = field(default_factory=dict, repr=False)

    @cached_property
    def rule_children(self) -> list[int]:
        """Return the number of nonterminal children of each base rule (0, 1 or 2), as a list."""
        rhs = self.rule_rhs
        return [int(v) for v in ((rhs >= 0) & (rhs < self.n_nonterminals)).sum(axis=1)]

    @property
    def n_nonterminals(self) -> int:
        """Return the number of nonterminals."""
        return len(self.nonterminals)

    @property
    def n_rules(self) -> int:
        """Return the number of base rules R."""
        return int(self.rule_lhs.shape[0])

    @cached_property
    def adapted_index(self) -> np.ndarray:
        """Return, per nonterminal, its position in :attr:`adapted` or -1 if not adapted."""
        out = np.full(self.n_nonterminals, -1, dtype=np.int64)
        out[self.adapted] = np.arange(self.adapted.shape[0])
        return out

    def symbol_name(self, code: int) -> str:
        """Return the name of a symbol code (terminals quoted).

        Parameters
        ----------
        code : int
            A symbol code.

        Returns
        -------
        str
        """
        if code < self.n_nonterminals:
            return self.nonterminals[code]
        return repr(self.terminals[code - self.n_nonterminals])

    def rule_text(self, r: int) -> str:
        """Return rule ``r`` as ``"A -> B C"``.

        Parameters
        ----------
        r : int
            A rule index.

        Returns
        -------
        str
        """
        rhs = [self.symbol_name(int(s)) for s in self.rule_rhs[r] if s >= 0]
        return f"{self.nonterminals[self.rule_lhs[r]]} -> {' '.join(rhs)}"

    def rules_of(self, nonterminal: int) -> np.ndarray:
        """Return the indices of the rules R(c) of a nonterminal.

        Parameters
        ----------
        nonterminal : int
            A nonterminal code.

        Returns
        -------
        ndarray of int64
        """
        return np.flatnonzero(self.rule_lhs == nonterminal)

    def encode(self, tokens: Sequence[str], *, where: str = "sentence") -> np.ndarray:
        """Map a sentence (a sequence of terminal tokens, e.g. a string's characters) to terminal ids.

        Parameters
        ----------
        tokens : sequence of str
            The sentence's terminals.
        where : str
            Names the sentence in the error message (e.g. ``"input.txt line 3"``).

        Returns
        -------
        ndarray of int64
            Terminal ids (not symbol codes).
        """
        index = self._terminal_index
        out = np.empty(len(tokens), dtype=np.int64)
        for i, tok in enumerate(tokens):
            t = index.get(tok)
            if t is None:
                raise InputError(f"{where}: terminal {tok!r} is not in the grammar's alphabet "
                                 f"({len(self.terminals)} terminals); bind the grammar to the data's alphabet")
            out[i] = t
        return out


# --------------------------------------------------------------------------------------------------
# parsing


def _error(path: str, line: int, message: str) -> InputError:
    return InputError(f"{path}, line {line}: {message}", path=path, line=line)


def _expand_ranges(spec: str, params: Mapping[str, int], path: str, line: int) -> list[dict[str, int]]:
    bindings: list[dict[str, int]] = [{}]
    for part in spec.split(","):
        part = part.strip().replace(" ", "")
        m = _RANGE.match(part)
        if not m:
            raise _error(path, line, f"cannot read range {part!r}; write 'for j=1..D' (several joined by commas)")
        var, lo_s, hi_s = m.groups()
        bounds = []
        for s in (lo_s, hi_s):
            if s.isdigit():
                bounds.append(int(s))
            elif s in params:
                bounds.append(int(params[s]))
            else:
                raise _error(path, line, f"range bound {s!r} is neither an integer nor a given parameter "
                                         f"(given: {', '.join(sorted(params)) or 'none'}); pass {s}=... when loading")
        bindings = [dict(b, **{var: v}) for b in bindings for v in range(bounds[0], bounds[1] + 1)]
    return bindings


_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _template(token: str, names: Iterable[str], path: str, line: int) -> tuple[str, bool]:
    """Compile a token: (the token, False) without ``{name}`` placeholders, else (a format string, True)."""
    parts = _PLACEHOLDER.split(token)
    if len(parts) == 1:
        return token, False
    bound = set(names)
    for name in parts[1::2]:
        if name not in bound:
            raise _error(path, line, f"{{{name}}} is used but no 'for {name}=..' range is given on this line")
    escaped = [p if k % 2 else p.replace("{", "{{").replace("}", "}}") for k, p in enumerate(parts)]
    return "".join(f"{{{p}}}" if k % 2 else p for k, p in enumerate(escaped)), True


def _fill(template: tuple[str, bool], binding: Mapping[str, int]) -> str:
    text, placeholders = template
    return sys.intern(text.format_map(binding)) if placeholders else text  # one copy of each name


def _check_name(token: str, path: str, line: int) -> None:
    if token in WILDCARDS or is_terminal(token):
        return
    if not _NAME.match(token):
        raise _error(path, line, f"bad symbol {token!r}: nonterminals are names (letters, digits, _ - .), "
                                 "terminals are quoted like 'a'")


def _parse_float(text: str, what: str, path: str, line: int) -> float:
    try:
        return float(text)
    except ValueError:
        raise _error(path, line, f"{what} must be a number, got {text!r}") from None


def parse_grammar(text: str, *, path: str = "<string>", params: Mapping[str, int] | None = None) -> GrammarSpec:
    """Parse and validate grammar-file text (format in the module docstring).

    Parameters
    ----------
    text : str
        The file's content.
    path : str
        Its name, used in error messages.
    params : mapping of str to int, optional
        Values of template parameters (``D``, ``K``) used by ``for`` ranges.

    Returns
    -------
    GrammarSpec

    Raises
    ------
    InputError
        On a malformed line or a grammar that breaks a rule of the format, naming file and line.
    """
    params = dict(params or {})
    rules: list[Rule] = []
    adaptors: list[Adaptor] = []
    start: tuple[str, int] | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        body, _, ranges = stripped.partition(" for ")
        bindings = _expand_ranges(ranges, params, path, lineno) if ranges.strip() else [{}]
        tokens = body.split()
        if tokens[0] == "start":
            if len(tokens) != 2 or ranges:
                raise _error(path, lineno, "write 'start SYMBOL'")
            if start is not None:
                raise _error(path, lineno, f"second 'start' line (the first is line {start[1]})")
            _check_name(tokens[1], path, lineno)
            start = (tokens[1], lineno)
            continue
        templates = [_template(t, bindings[0], path, lineno) for t in tokens]
        proto: Rule | None = None
        same_alpha = not any(placeholders for text, placeholders in templates if text.startswith("alpha="))
        for binding in bindings:
            if proto is not None and same_alpha:
                # The line's later bindings differ from its first only by the integers filled in, which keep
                # every symbol's kind and validity: only the names change (a D x K template expands to
                # millions of rules).
                rules.append(Rule(_fill(templates[0], binding),
                                  tuple(_fill(t, binding) for t in templates[2:2 + len(proto.rhs)]), proto.alpha,
                                  lineno))
                continue
            toks = [_fill(t, binding) for t in templates]
            if toks[0] == "@" or toks[0].startswith("@"):
                rest = toks[1:] if toks[0] == "@" else [toks[0][1:]] + toks[1:]
                adaptors.append(_parse_adaptor(rest, path, lineno))
            else:
                proto = _parse_rule(toks, path, lineno)
                rules.append(proto)
    if not rules:
        raise InputError(f"{path}: the grammar has no rules", path=path)
    start_symbol = start[0] if start else rules[0].lhs
    spec = GrammarSpec(tuple(rules), tuple(adaptors), start_symbol, path)
    _validate(spec, start[1] if start else rules[0].line)
    return spec


def _parse_adaptor(tokens: list[str], path: str, line: int) -> Adaptor:
    if not tokens:
        raise _error(path, line, "an '@' line names the adapted nonterminal: '@ Word a=100 b=0 K=1500'")
    symbol = tokens[0]
    _check_name(symbol, path, line)
    if is_terminal(symbol) or symbol in WILDCARDS:
        raise _error(path, line, f"only nonterminals can be adapted, not {symbol}")
    values: dict[str, str] = {}
    for tok in tokens[1:]:
        key, eq, value = tok.partition("=")
        if not eq or key not in ("a", "b", "K"):
            raise _error(path, line, f"unknown field {tok!r} on an '@' line; fields are a=, b=, K=")
        values[key] = value
    a = _parse_float(values.get("a", str(DEFAULT_A)), "a (concentration)", path, line)
    b = _parse_float(values.get("b", str(DEFAULT_B)), "b (discount)", path, line)
    k_text = values.get("K", str(DEFAULT_TRUNCATION))
    if not k_text.isdigit() or int(k_text) < 1:
        raise _error(path, line, f"K (truncation) must be an integer >= 1, got {k_text!r}")
    if not 0.0 <= b < 1.0:
        raise _error(path, line, f"b (discount) must lie in [0, 1), got {b}")
    if not a > -b or a <= 0.0:
        raise _error(path, line, f"a (concentration) must be > 0, got {a}")
    return Adaptor(symbol, a, b, int(k_text), line)


def _parse_rule(tokens: list[str], path: str, line: int) -> Rule:
    if len(tokens) < 3 or tokens[1] != "->":
        raise _error(path, line, "a rule reads 'LHS -> RHS [RHS2] [alpha=0.5]'")
    lhs = tokens[0]
    _check_name(lhs, path, line)
    if is_terminal(lhs) or lhs in WILDCARDS:
        raise _error(path, line, f"the left-hand side must be a nonterminal, not {lhs}")
    rhs = tokens[2:]
    alpha: float | None = None
    if rhs and rhs[-1].startswith("alpha="):
        alpha = _parse_float(rhs[-1][6:], "alpha", path, line)
        if not alpha > 0:
            raise _error(path, line, f"alpha must be > 0, got {alpha}")
        rhs = rhs[:-1]
    if len(rhs) not in (1, 2):
        raise _error(path, line, f"rules must be binarized: {len(rhs)} right-hand-side symbols "
                                 f"({' '.join(rhs) or 'none'}); split it with a new nonterminal")
    for sym in rhs:
        _check_name(sym, path, line)
    for wildcard in WILDCARDS:
        if wildcard in rhs and len(rhs) != 1:
            raise _error(path, line, f"{wildcard} must be the only right-hand-side symbol of its rule")
    return Rule(lhs, tuple(rhs), alpha, line)


def _validate(spec: GrammarSpec, start_line: int) -> None:
    path = spec.path
    defined: dict[str, int] = {}
    for rule in spec.rules:
        defined.setdefault(rule.lhs, rule.line)
    seen_rules: dict[tuple[str, tuple[str, ...]], int] = {}
    for rule in spec.rules:
        key = (rule.lhs, rule.rhs)
        if key in seen_rules:
            raise _error(path, rule.line, f"duplicate rule {rule.lhs} -> {' '.join(rule.rhs)} "
                                          f"(first on line {seen_rules[key]})")
        seen_rules[key] = rule.line
        for sym in rule.rhs:
            if sym not in defined and sym not in WILDCARDS and not is_terminal(sym):
                raise _error(path, rule.line, f"nonterminal {sym!r} has no rule; quote terminals like '{sym}'")
    if spec.start not in defined:
        raise _error(path, start_line, f"start symbol {spec.start!r} has no rule")
    adapted: dict[str, int] = {}
    for ad in spec.adaptors:
        if ad.symbol in adapted:
            raise _error(path, ad.line, f"{ad.symbol} is declared adapted twice (first on line {adapted[ad.symbol]})")
        if ad.symbol not in defined:
            raise _error(path, ad.line, f"adapted nonterminal {ad.symbol!r} has no rule")
        adapted[ad.symbol] = ad.line
    children: dict[str, set[str]] = {nt: set() for nt in defined}
    unary: dict[str, set[str]] = {nt: set() for nt in defined}
    for rule in spec.rules:
        nts = [s for s in rule.rhs if s in defined]
        children[rule.lhs].update(nts)
        if len(rule.rhs) == 1 and nts:
            unary[rule.lhs].add(nts[0])
    # reachability from the start symbol
    reach = _reachable(children, spec.start)
    for nt, line in defined.items():
        if nt not in reach:
            raise _error(path, line, f"nonterminal {nt!r} cannot be reached from the start symbol {spec.start!r}")
    # P6: no adapted nonterminal reaches itself
    for symbol, line in adapted.items():
        if symbol in _reachable(children, symbol, include_self=False):
            raise _error(path, line, f"adapted nonterminal {symbol!r} is recursive (it can derive itself); "
                                     "adaptor grammars only adapt non-recursive nonterminals ([Z] section 8.1.1)")
    # P7: no unary cycle
    cycle = _find_cycle(unary)
    if cycle:
        line = next(r.line for r in spec.rules if r.lhs == cycle[0] and r.rhs == (cycle[1],))
        raise _error(path, line, f"cycle of unary rules {' -> '.join(cycle)}: the inside algorithm needs unary "
                                 "rules without cycles")
    # productivity: every nonterminal derives some terminal string (a worklist, linear in the rules)
    productive: set[str] = set()
    pending: list[int] = []
    waiting: dict[str, list[int]] = {}
    ready: list[str] = []
    for index, rule in enumerate(spec.rules):
        needs = {sym for sym in rule.rhs if sym in defined}
        pending.append(len(needs))
        for sym in needs:
            waiting.setdefault(sym, []).append(index)
        if not needs:
            ready.append(rule.lhs)
    while ready:
        nt = ready.pop()
        if nt in productive:
            continue
        productive.add(nt)
        for index in waiting.get(nt, ()):
            pending[index] -= 1
            if pending[index] == 0:
                ready.append(spec.rules[index].lhs)
    barren = [nt for nt in defined if nt not in productive]
    if barren:
        names = ", ".join(repr(nt) for nt in barren)
        raise _error(path, defined[barren[0]], f"nonterminal(s) {names} derive no finite string of terminals")


def _reachable(children: Mapping[str, set[str]], root: str, *, include_self: bool = True) -> set[str]:
    seen: set[str] = {root} if include_self else set()
    stack = list(children[root])
    while stack:
        nt = stack.pop()
        if nt in seen:
            continue
        seen.add(nt)
        stack.extend(children[nt])
    return seen


def _find_cycle(edges: Mapping[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in edges:
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def _topological(nodes: Sequence[str], children: Mapping[str, set[str]]) -> list[str]:
    """Order nodes so that every child comes before its parents (children only among ``nodes``)."""
    out: list[str] = []
    done: set[str] = set()

    def visit(node: str) -> None:
        if node in done:
            return
        done.add(node)
        for nxt in sorted(children[node]):
            visit(nxt)
        out.append(node)

    for node in nodes:
        visit(node)
    return out


def _compile(spec: GrammarSpec, alphabet: tuple[str, ...]) -> Grammar:
    nonterminals = spec.nonterminals
    nt_index = {nt: i for i, nt in enumerate(nonterminals)}
    n_nt = len(nonterminals)
    t_index = {t: i for i, t in enumerate(alphabet)}
    code_of = {**nt_index, **{f"'{t}'": n_nt + i for i, t in enumerate(alphabet)}}  # a rhs symbol's code
    lhs: list[int] = []
    rhs0: list[int] = []
    rhs1: list[int] = []
    alpha: list[float] = []  # NaN: the default 1 / |R(lhs)|
    lines: list[int] = []
    nan = math.nan
    for rule in spec.rules:
        if len(rule.rhs) == 1 and rule.rhs[0] in WILDCARDS:
            explicit = {s for r in spec.rules if r.lhs == rule.lhs for s in r.rhs}
            quoted = set(spec.terminals()) if rule.rhs[0] == UNQUOTED_TERMINAL else set()
            for t, ti in t_index.items():
                if f"'{t}'" in explicit or t in quoted:
                    continue
                lhs.append(nt_index[rule.lhs])
                rhs0.append(n_nt + ti)
                rhs1.append(-1)
                alpha.append(nan if rule.alpha is None else rule.alpha)
                lines.append(rule.line)
            continue
        symbols = rule.rhs
        lhs.append(nt_index[rule.lhs])
        rhs0.append(code_of[symbols[0]])
        rhs1.append(code_of[symbols[1]] if len(symbols) == 2 else -1)
        alpha.append(nan if rule.alpha is None else rule.alpha)
        lines.append(rule.line)
    rule_lhs = np.asarray(lhs, dtype=np.int64)
    rule_rhs = np.stack([np.asarray(rhs0, dtype=np.int64), np.asarray(rhs1, dtype=np.int64)], axis=1).reshape(-1, 2)
    n_of = np.bincount(rule_lhs, minlength=n_nt)
    empty = [nonterminals[i] for i in range(n_nt) if n_of[i] == 0]
    if empty:
        raise InputError(f"{spec.path}: nonterminal(s) {', '.join(empty)} expand only to <any> or <unquoted> "
                         "and the data bring no terminal for them", path=spec.path)
    given = np.asarray(alpha, dtype=np.float64)
    rule_alpha = np.where(np.isnan(given), 1.0 / np.maximum(n_of, 1)[rule_lhs], given)
    children: dict[str, set[str]] = {nt: set() for nt in nonterminals}
    unary: dict[str, set[str]] = {nt: set() for nt in nonterminals}
    for column in (0, 1):  # the distinct (parent, nonterminal child) pairs, not one per rule
        child = rule_rhs[:, column]
        is_nt = (child >= 0) & (child < n_nt)
        for pair in np.unique(rule_lhs[is_nt] * n_nt + child[is_nt]).tolist():
            children[nonterminals[pair // n_nt]].add(nonterminals[pair % n_nt])
    is_unary = (rule_rhs[:, 1] < 0) & (rule_rhs[:, 0] < n_nt)
    for pair in np.unique(rule_lhs[is_unary] * n_nt + rule_rhs[is_unary, 0]).tolist():
        unary[nonterminals[pair // n_nt]].add(nonterminals[pair % n_nt])
    adaptors = {ad.symbol: ad for ad in spec.adaptors}
    adapted_order = [nt for nt in _topological(nonterminals, children) if nt in adaptors]
    unary_order = _topological(nonterminals, unary)
    return Grammar(
        nonterminals=nonterminals,
        terminals=alphabet,
        start=nt_index[spec.start],
        rule_lhs=rule_lhs,
        rule_rhs=rule_rhs,
        rule_alpha=rule_alpha,
        rule_line=np.asarray(lines, dtype=np.int64),
        adapted=np.asarray([nt_index[nt] for nt in adapted_order], dtype=np.int64),
        pitman_yor_a=np.asarray([adaptors[nt].a for nt in adapted_order], dtype=np.float64),
        pitman_yor_b=np.asarray([adaptors[nt].b for nt in adapted_order], dtype=np.float64),
        truncation=np.asarray([adaptors[nt].truncation for nt in adapted_order], dtype=np.int64),
        unary_order=np.asarray([nt_index[nt] for nt in unary_order], dtype=np.int64),
        path=spec.path,
        _terminal_index=t_index,
    )


def load_grammar(name_or_path: str | Path, **params: int) -> GrammarSpec:
    """Read a shipped grammar (``unigram``, ``collocation``, ``infvoc-lda``) or a grammar file.

    Parameters
    ----------
    name_or_path : str or Path
        One of :data:`SHIPPED_GRAMMARS` or the path of a grammar file.
    **params : int
        Template parameters, e.g. ``D=100, K=5`` for ``infvoc-lda``.

    Returns
    -------
    GrammarSpec

    Raises
    ------
    InputError
        If the file cannot be read or breaks the format.
    """
    name = str(name_or_path)
    if name in SHIPPED_GRAMMARS:
        res = resources.files("topicflow") / "data" / "grammars" / f"{name}.grammar"
        return parse_grammar(res.read_text(encoding="utf-8"), path=f"<shipped {name}.grammar>", params=params)
    path = Path(name)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"grammar file {name} not found (shipped grammars: {', '.join(SHIPPED_GRAMMARS)})",
                         path=name) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"grammar file {name} is not UTF-8 text ({exc})", path=name) from None
    return parse_grammar(text, path=name, params=params)
