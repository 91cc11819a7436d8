#!/usr/bin/env python3
"""Generates src/identity/account/collation_table.rs from the real weight
tables of the databases that sign accounts in.

The account key is `normalize` (NFKC_Casefold, default ignorables removed,
White_Space trimmed) and then `collate` (src/identity/account/collation.rs),
which must fold at least what these collations equate, each at primary
strength:

- MariaDB's own, asked with WEIGHT_STRING() of a private server
  (tests/oracle/mariadb.py; Debian's package, scripts/install-mariadb.sh):
  `utf8mb4_general_ci` (MySQL 5.7's and MariaDB 10.x's default),
  `utf8mb4_unicode_520_ci` (UCA 5.2.0) and `utf8mb4_uca1400_ai_ci` (UCA
  14.0.0, MariaDB 11's default);
- MySQL 8's `utf8mb4_0900_ai_ci`: DUCET 9.0.0 as PyPI's pyuca 1.2 ships it
  (allkeys-9.0.0.txt), primary weights, contiguous contractions, no
  normalization of the input (as MySQL).

What it does: asks every collation for the weight of every BMP code point
(surrogates aside) and of the supplementary planes 1-3 and 14; builds one
map for the characters `normalize` can leave (after canonical decomposition,
which `collate` applies first): letters a collation weighs alike map to one
representative, primary-ignorable characters are dropped, expansions
(`æ` = `ae`) map to strings; checks the result against every group of
equal weights, every DUCET contraction and a random sample of strings
(weighed by the server and by the DUCET), and prints every conflict that no
per-character map can satisfy, with the rule (in collation.rs) that
satisfies it. It exits non-zero if any conflict is left.

Run from the repository root (a few seconds; needs the server and pyuca):

    scripts/install-mariadb.sh
    .venv/bin/pip install pyuca==1.2
    .venv/bin/python scripts/gen-collation-table.py [--check]

`--check` writes nothing and fails if the generated file differs.
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import time
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "oracle"))

from mariadb import private_mariadb  # noqa: E402

OUT = ROOT / "src" / "identity" / "account" / "collation_table.rs"
MARIADB = ["utf8mb4_general_ci", "utf8mb4_unicode_520_ci", "utf8mb4_uca1400_ai_ci"]
MYSQL = "utf8mb4_0900_ai_ci"
AI = ["utf8mb4_unicode_520_ci", "utf8mb4_uca1400_ai_ci", MYSQL]
DUCET_VERSION = "9.0.0"

BMP = [cp for cp in range(0x10000) if not 0xD800 <= cp <= 0xDFFF]
SUPP_RANGES = [(0x10000, 0x3FFFF), (0xE0000, 0xE0FFF)]

# ---------------------------------------------------------------------------
# The key, in Python: `normalize` (src/identity/account/normalize.rs) and
# `collate` (collation.rs). The test (tests/oracle/test_collation.py) checks
# the Rust ones; these decide the table.

WHITE_SPACE = {
    *range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
    0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
}
DEFAULT_IGNORABLE = [
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
]
# Unicode's Logical_Order_Exception: the Thai, Lao, New Tai Lue and Tai
# Viet vowels written before the consonant they follow in speech. The UCA
# collations weigh a prevowel and its consonant as the consonant then the
# vowel (DUCET contractions), so `เก` = `กเ`.
LOGICAL_ORDER_EXCEPTION = {
    *range(0x0E40, 0x0E45), *range(0x0EC0, 0x0EC5), *range(0x19B5, 0x19B8), 0x19BA,
    0xAAB5, 0xAAB6, 0xAAB9, 0xAABB, 0xAABC,
}


def supplementary_compat(c: str) -> bool:
    """A supplementary-plane character that `normalize` changes: general_ci
    weighs it as U+FFFD, `normalize` as what it folds to (`𝐚` is `a`)."""
    return ord(c) > 0xFFFF and any(ord(x) <= 0xFFFF for x in fold(c))


# The rules collation.rs applies after the map.
RULES = frozenset({"prevowels", "s-run", "l-middle-dot", "hamza"})
# The letters whose high-hamza forms (U+0675-0678) NFKC writes as the letter
# then U+0674, and uca1400 weighs as hamza then the letter.
HAMZA_CARRIERS = "\u0627\u0648\u06c7\u064a"

# Characters whose whole class the key drops, and why (see build()).
FORCED_DROPS = {
    0x0020: "U+FC5E-FC63 and U+FE70-FE7E are primary-ignorable, normalize makes them a space and a mark",
    0x03B9: "U+0345 is primary-ignorable, normalize makes it ι",
}


def default_ignorable(c: str) -> bool:
    cp = ord(c)
    return any(a <= cp <= b for a, b in DEFAULT_IGNORABLE)


def trim(s: str) -> str:
    i, j = 0, len(s)
    while i < j and ord(s[i]) in WHITE_SPACE:
        i += 1
    while j > i and ord(s[j - 1]) in WHITE_SPACE:
        j -= 1
    return s[i:j]


def fold(raw: str) -> str:
    s = unicodedata.normalize("NFD", raw).casefold()
    s = unicodedata.normalize("NFKD", s).casefold()
    s = unicodedata.normalize("NFKC", s)
    return "".join(c for c in s if not default_ignorable(c))


def normalize(raw: str) -> str | None:
    t = trim(fold(raw))
    return t or None


class Key:
    """`collate`, given the table (and the rules, which are code)."""

    def __init__(self, single: dict[int, int], expand: dict[int, str], drop: set[int],
                 rules: frozenset[str] = RULES, truncate: list[tuple[str, str]] = ()) -> None:
        self.single, self.expand, self.drop, self.rules = single, expand, drop, rules
        self.truncate = list(truncate)
        self.unsettled: set[int] = set()

    def char(self, c: str) -> str:
        cp = ord(c)
        if cp > 0xFFFF or cp in self.drop:
            return ""
        if cp in self.expand:
            return self.expand[cp]
        return chr(self.single.get(cp, cp))

    def collate(self, folded: str) -> str:
        s = "".join(self.char(c) for c in unicodedata.normalize("NFD", folded))
        s = trim(s)
        # The prevowels go to the end, in their order.
        if "prevowels" in self.rules:
            s = "".join(c for c in s if ord(c) not in LOGICAL_ORDER_EXCEPTION) + "".join(
                c for c in s if ord(c) in LOGICAL_ORDER_EXCEPTION
            )
        out: list[str] = []
        for c in s:
            # A run of `s` is one `s` (`ß` is `s` to general_ci, `ss` to the UCA).
            if "s-run" in self.rules and c == "s" and out and out[-1] == "s":
                continue
            # `l·` is `l` to the UCA (a contraction).
            if "l-middle-dot" in self.rules and c == "\u00b7" and out and out[-1] == "l":
                continue
            # A hamza goes before the alefs, waws and yehs right before it:
            # NFKC makes `ٵ` alef and high hamza, uca1400 weighs it as hamza
            # and alef.
            if "hamza" in self.rules and c == "\u0621":
                i = len(out)
                while i > 0 and out[i - 1] in HAMZA_CARRIERS:
                    i -= 1
                out.insert(i, c)
                continue
            out.append(c)
        s = trim("".join(out))
        for long, short in self.truncate:
            s = s.replace(long, short)
        return s

    def key(self, raw: str, refuse_unsettled: bool = False) -> str | None:
        """The account's key, None when the filter refuses or reads nothing.
        `refuse_unsettled`: also refuse what no key can count right (see
        unsettled())."""
        if any(unicodedata.category(c) == "Cc" for c in raw):
            return None
        if refuse_unsettled and any(ord(c) in self.unsettled for c in raw):
            return None
        n = normalize(raw)
        return None if n is None else self.collate(n)


# ---------------------------------------------------------------------------
# Weights.


def weights_from_db(db, collations: list[str]) -> dict[str, dict[int, tuple[int, ...]]]:
    """Every BMP code point (and planes 1-3, 14) under each collation: the
    primary weights as 16-bit units."""
    sql = ["SET SESSION max_recursive_iterations = 2000000;",
           "CREATE TABLE ch (cp INT PRIMARY KEY, c VARCHAR(1) CHARACTER SET utf8mb4 "
           "COLLATE utf8mb4_bin NOT NULL);"]
    for lo, hi in [(0, 0xFFFF), *SUPP_RANGES]:
        sql.append(
            "INSERT INTO ch WITH RECURSIVE s(n) AS (SELECT %d UNION ALL SELECT n + 1 FROM s "
            "WHERE n < %d) SELECT n, CONVERT(CHAR(n USING utf32) USING utf8mb4) FROM s "
            "WHERE n NOT BETWEEN 0xD800 AND 0xDFFF;" % (lo, hi)
        )
    db.query("\n".join(sql))
    out = {}
    for coll in collations:
        rows = db.query(f"SELECT cp, HEX(WEIGHT_STRING(c COLLATE {coll})) FROM ch")
        out[coll] = {int(cp): units(w) for cp, w in rows}
    return out


def units(hexw: str) -> tuple[int, ...]:
    return tuple(int(hexw[i:i + 4], 16) for i in range(0, len(hexw), 4))


def utf32(s: str) -> str:
    if not s:
        return "_utf8mb4''"
    return "CONVERT(_utf32 0x%s USING utf8mb4)" % "".join("%08X" % ord(c) for c in s)


def db_weigh_strings(db, strings: list[str], collations: list[str]) -> dict[str, list[tuple]]:
    """Primary weights of each string under each collation (one SELECT
    each, over a table of the strings)."""
    db.query("DROP TABLE IF EXISTS st; CREATE TABLE st (i INT PRIMARY KEY, "
             "s VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL);")
    for lo in range(0, len(strings), 2000):
        chunk = strings[lo:lo + 2000]
        db.query("INSERT INTO st VALUES " + ",".join(
            f"({lo + i},{utf32(s)})" for i, s in enumerate(chunk)))
    out = {}
    for coll in collations:
        rows = db.query(f"SELECT i, HEX(WEIGHT_STRING(s COLLATE {coll})) FROM st ORDER BY i")
        out[coll] = [units(w) for _, w in rows]
    return out


class Ducet:
    """MySQL 8's utf8mb4_0900_ai_ci at primary strength: DUCET 9.0.0, the
    longest contiguous contraction first, implicit weights for what the
    table does not list, Hangul syllables as their jamo, no normalization."""

    def __init__(self) -> None:
        import pyuca  # noqa: F401 (pinned 1.2: allkeys 5.2.0 to 10.0.0)

        path = Path(pyuca.__file__).parent / f"allkeys-{DUCET_VERSION}.txt"
        self.table: dict[tuple[int, ...], tuple[int, ...]] = {}
        self.implicit: list[tuple[int, int, int]] = []
        for line in path.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if not line or line.startswith("@version"):
                continue
            if line.startswith("@implicitweights"):
                rng, base = line[len("@implicitweights"):].split(";")
                lo, hi = rng.split("..")
                self.implicit.append((int(lo, 16), int(hi, 16), int(base, 16)))
                continue
            chars, elems = line.split(";", 1)
            key = tuple(int(x, 16) for x in chars.split())
            prim = []
            for el in elems.strip().strip("[]").split("]["):
                p = int(el[1:5], 16)
                if p:
                    prim.append(p)
            self.table[key] = tuple(prim)
        self.longest = max(len(k) for k in self.table)
        self.contractions = [k for k in self.table if len(k) > 1]

    def implicit_weights(self, cp: int) -> tuple[int, ...]:
        for lo, hi, base in self.implicit:
            if lo <= cp <= hi:
                return (base, (cp - lo) | 0x8000)
        name = unicodedata.name(chr(cp), "")
        if name.startswith("CJK UNIFIED IDEOGRAPH") or name.startswith("CJK COMPATIBILITY IDEOGRAPH-FA"):
            core = 0x4E00 <= cp <= 0x9FFF or 0xF900 <= cp <= 0xFAFF
            base = 0xFB40 if core else 0xFB80
        else:
            base = 0xFBC0
        return (base + (cp >> 15), (cp & 0x7FFF) | 0x8000)

    def weigh(self, s: str) -> tuple[int, ...]:
        cps = []
        for c in s:
            cp = ord(c)
            if 0xAC00 <= cp <= 0xD7A3:  # Hangul: the UCA weighs the jamo
                cps.extend(ord(j) for j in unicodedata.normalize("NFD", c))
            else:
                cps.append(cp)
        out: list[int] = []
        i = 0
        while i < len(cps):
            for n in range(min(self.longest, len(cps) - i), 0, -1):
                w = self.table.get(tuple(cps[i:i + n]))
                if w is not None:
                    out.extend(w)
                    i += n
                    break
            else:
                out.extend(self.implicit_weights(cps[i]))
                i += 1
        return tuple(out)


# ---------------------------------------------------------------------------
# The map.


class UnionFind:
    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, x: int) -> int:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def unsettled(weights: dict[str, dict[int, tuple[int, ...]]]) -> set[int]:
    """Supplementary characters no key counts right: general_ci weighs every
    supplementary character as U+FFFD, so they all share a key, and as the
    UCA ignores some of them, that key is nothing; yet `normalize` makes
    these a BMP character (`𝐚` is `a`) or a UCA collation weighs them as
    one or two (`🅼` is `m`, `𑁧` is `1`). Only a refusal counts them."""
    out = set()
    for lo, hi in SUPP_RANGES:
        out.update(cp for cp in range(lo, hi + 1) if supplementary_compat(chr(cp)))
    for coll in MARIADB[1:]:
        bmp = {weights[coll][cp] for cp in BMP if weights[coll][cp]}
        for lo, hi in SUPP_RANGES:
            for cp in range(lo, hi + 1):
                w = weights[coll][cp]
                if w in bmp or any(w[:k] in bmp and w[k:] in bmp for k in range(1, len(w))):
                    out.add(cp)
    return out


def refused(c: str) -> bool:
    return unicodedata.category(c) == "Cc"


def build(weights: dict[str, dict[int, tuple[int, ...]]], log,
          forced: dict[int, str] | None = None) -> tuple[dict, dict, set, dict]:
    """The map: single, expand, drop, and what it was built from."""
    forced = FORCED_DROPS if forced is None else forced
    # Primary-ignorable under any accent-insensitive collation: dropped.
    # The replacement character too: general_ci weighs every supplementary
    # character as U+FFFD, and the UCA collations ignore some of them.
    drop = {cp for coll in AI for cp in BMP if not weights[coll][cp]}
    drop |= {cp for cp in BMP if weights["utf8mb4_general_ci"][cp] == (0xFFFD,)}

    def pieces(raw: str) -> str:
        """What the per-character map sees of a raw name (no trim: inside
        a name)."""
        return "".join(
            c for c in unicodedata.normalize("NFD", fold(raw))
            if ord(c) <= 0xFFFF and ord(c) not in drop
        )

    # The characters `collate` can be given (after its NFD).
    domain = set()
    for cp in BMP:
        if not refused(chr(cp)):
            domain.update(ord(c) for c in pieces(chr(cp)))

    uf = UnionFind()
    for cp in domain:
        uf.find(cp)
    colls = list(weights)
    groups: dict[str, dict[tuple, list[int]]] = {}
    for coll in colls:
        g = collections.defaultdict(list)
        for cp in BMP:
            w = weights[coll][cp]
            if not refused(chr(cp)):
                g[w].append(cp)
        groups[coll] = g
        for w, members in g.items():
            if not w:
                continue
            singles = [p for p in (pieces(chr(cp)) for cp in members) if len(p) == 1]
            for p in singles[1:]:
                uf.union(ord(singles[0]), ord(p))

    # Expansions: a character the UCA weighs as the weights of two or more
    # characters in a row (`æ` = `a` `e`).
    by_weight = {coll: {w: m for w, m in groups[coll].items()} for coll in AI}
    expansions: dict[int, dict[str, list[int]]] = collections.defaultdict(dict)
    for coll in AI:
        for cp in sorted(domain):
            w = weights[coll][cp]
            if len(w) < 2 or len(by_weight[coll].get(w, [])) == 0:
                continue
            seg = segment(w, by_weight[coll], pieces)
            if seg and len(seg) > 1:
                expansions[cp][coll] = seg
    # A class that expands takes its (first) expansion; the pieces are
    # classes themselves.
    classes = collections.defaultdict(list)
    for cp in domain:
        classes[uf.find(cp)].append(cp)
    expand_class: dict[int, list[int]] = {}
    for cp, by in sorted(expansions.items()):
        root = uf.find(cp)
        for coll, seg in by.items():
            segr = [uf.find(x) for x in seg]
            if root in segr:
                log(f"expansion of U+{cp:04X} under {coll} contains itself: left to the rules")
                continue
            prev = expand_class.get(root)
            if prev is not None and prev != segr:
                log(f"expansions disagree for U+{cp:04X}: {prev} vs {segr} ({coll})")
                continue
            expand_class[root] = segr
    rep = {root: min(members) for root, members in classes.items()}
    # Classes dropped whole, for conflicts no per-character map satisfies:
    # - the space (and what a collation weighs alike): the UCA ignores
    #   Arabic isolated vowel marks such as U+FE70 (`ﹰ`), which `normalize`
    #   turns into a space and a mark, so `aﹰb` is `ab` and, through the
    #   same key, `a b`;
    # - `ι`: the UCA ignores the iota subscript (U+0345, `ᾳ` = `α`), which
    #   case folding turns into `ι`.
    dropped_roots = set()
    for cp, why in forced.items():
        root = uf.find(cp)
        dropped_roots.add(root)
        log(f"dropped whole: the class of U+{cp:04X} ({len(classes[root])} characters): {why}")
        drop.update(classes[root])

    def render(root: int, depth: int = 0) -> str:
        if root in dropped_roots:
            return ""
        if root in expand_class and depth < 8:
            return "".join(render(r, depth + 1) for r in expand_class[root])
        return chr(rep[root])

    single, expand = {}, {}
    for cp in sorted(domain):
        if cp in drop:
            continue
        out = render(uf.find(cp))
        if out == chr(cp):
            continue
        if len(out) == 1:
            single[cp] = ord(out)
        else:
            # In the order the rules leave it (a prevowel last), so that
            # what the table gives is a key.
            expand[cp] = Key({}, {}, set()).collate(out)
    meta = {"groups": groups, "domain": domain, "expansions": expansions}
    return single, expand, drop, meta


def segment(w: tuple, groups: dict[tuple, list[int]], pieces) -> list[int] | None:
    """`w` cut into the weights of single characters (each one that the map
    sees as one character), fewest cuts past one; None if it cannot be."""
    n = len(w)
    best: list[list[int] | None] = [None] * (n + 1)
    best[0] = []
    for i in range(n):
        if best[i] is None:
            continue
        for j in range(i + 1, n + 1):
            if (i, j) == (0, n):
                continue
            members = groups.get(w[i:j])
            if not members:
                continue
            ok = [p for p in (pieces(chr(m)) for m in members) if len(p) == 1]
            if not ok:
                continue
            cand = best[i] + [ord(ok[0])]
            if best[j] is None or len(cand) < len(best[j]):
                best[j] = cand
    return best[n]


# ---------------------------------------------------------------------------
# Checks.


def check_groups(key: Key, groups: dict[str, dict[tuple, list[int]]], around: str = "") -> list[str]:
    """Characters a collation weighs alike share a key, alone and between
    two letters (`around`)."""
    problems = []
    for coll, g in groups.items():
        for w, members in g.items():
            if (len(members) < 2 and w) or (not w and not around):
                continue
            keys = collections.defaultdict(list)
            if not w:  # primary-ignorable: as if absent
                keys[key.key(around * 2)] = []
            for cp in members:
                k = key.key(around + chr(cp) + around)
                if k is not None:
                    keys[k].append(cp)
            if len(keys) > 1:
                problems.append(f"{coll}: {' | '.join(show_group(k, v) for k, v in keys.items())}")
    return problems


def show_group(k: str, cps: list[int]) -> str:
    return f"{k!r}: " + " ".join(f"U+{c:04X}" for c in cps[:6]) + (" …" if len(cps) > 6 else "")


def check_weighed(key: Key, strings: list[str], weighed: dict[str, list[tuple]],
                  refuse: bool = False) -> list[str]:
    """Strings a collation weighs alike must share a key."""
    problems = []
    for coll, ws in weighed.items():
        g = collections.defaultdict(set)
        for s, w in zip(strings, ws):
            k = key.key(s, refuse)
            if k is not None:
                g[w].add((k, s))
        for w, ks in g.items():
            one = {}
            for k, s in sorted(ks, key=lambda ks: (len(ks[1]), ks)):
                one.setdefault(k, s)
            if len(one) > 1:
                ex = list(one.items())[:4]
                problems.append(f"{coll}: " + ", ".join(f"{s!r}→{k!r}" for k, s in ex))
    return problems


def sample_strings(meta, seed: int = 7, n: int = 40000) -> list[str]:
    """Random short names from the characters that collations make
    interesting: letters and their look-alikes, marks, ignorables, spaces,
    prevowels, contractions' parts, Hangul, supplementary characters."""
    rnd = random.Random(seed)
    groups = meta["groups"]
    interesting = set()
    for coll, g in groups.items():
        for w, members in g.items():
            if 1 < len(members) < 40 or not w:
                interesting.update(members)
    pool = sorted(interesting)
    base = [ord(c) for c in "victimalsbde"] + [0x20, 0x00B7, 0x0334, 0x0301, 0x0306, 0x0438, 0x0439,
                                                0x00DF, 0x00E6, 0x0E01, 0x0E40, 0x0E48, 0x0EC0, 0x0E81,
                                                0x1100, 0x1161, 0x11A8, 0xAC00, 0x1F600, 0x1D167,
                                                0x1D41A, 0xFFFD, 0x2000, 0x00A0, 0x3000]
    out = set()
    while len(out) < n:
        length = rnd.randint(1, 5)
        s = "".join(chr(rnd.choice(base) if rnd.random() < 0.6 else rnd.choice(pool))
                    for _ in range(length))
        if not any(refused(c) for c in s):
            out.add(s)
    return sorted(out)


# ---------------------------------------------------------------------------
# Output.


def ranges(cps: set[int]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for cp in sorted(cps):
        if out and out[-1][1] == cp - 1:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return [(a, b) for a, b in out]


def rust_str(s: str) -> str:
    return "".join(c if 0x20 < ord(c) < 0x7F and c not in '"\\' else f"\\u{{{ord(c):x}}}" for c in s)


def render_rust(single: dict[int, int], expand: dict[int, str], drop: set[int],
                truncate: list[tuple[str, str]], unsettled: set[int], versions: str) -> str:
    drop_ranges = ranges({cp for cp in drop})
    lines = [
        "// @generated by scripts/gen-collation-table.py: do not edit by hand.",
        "// Regenerate from the repository root (needs Debian's MariaDB and pyuca):",
        "//   scripts/install-mariadb.sh && .venv/bin/pip install pyuca==1.2",
        "//   .venv/bin/python scripts/gen-collation-table.py",
        f"// From: {versions}.",
        "// Applied by collation.rs to the NFD of a `normalize`d name.",
        "",
        "/// Characters that map to another one, sorted by the first.",
        "#[rustfmt::skip]",
        "pub(super) const SINGLE: &[(u16, u16)] = &[",
    ]
    def rows(items: list[str], per_row: int) -> None:
        for i in range(0, len(items), per_row):
            lines.append("    " + "".join(items[i:i + per_row]))

    rows([f"(0x{cp:04X},0x{to:04X})," for cp, to in sorted(single.items())], 6)
    lines += [
        "];",
        "",
        "/// Characters that map to a string (expansions), sorted.",
        "#[rustfmt::skip]",
        "pub(super) const EXPAND: &[(u16, &str)] = &[",
    ]
    for cp, s in sorted(expand.items()):
        name = unicodedata.name(chr(cp), "?").lower()
        lines.append(f'    (0x{cp:04X}, "{rust_str(s)}"), // {name}')
    lines += [
        "];",
        "",
        "/// Primary-ignorable characters, dropped: inclusive ranges, sorted.",
        "#[rustfmt::skip]",
        "pub(super) const DROP: &[(u16, u16)] = &[",
    ]
    rows([f"(0x{a:04X},0x{b:04X})," for a, b in drop_ranges], 6)
    lines += [
        "];",
        "",
        "/// Long expansions MariaDB weighs by their start only: (the key of the",
        "/// whole, the key of what it is weighed as).",
        "#[rustfmt::skip]",
        "pub(super) const TRUNCATE: &[(&str, &str)] = &[",
    ]
    for long, short in truncate:
        lines.append(f'    ("{rust_str(long)}", "{rust_str(short)}"),')
    lines += [
        "];",
        "",
        "/// Supplementary characters no key counts right (normalize makes them",
        "/// BMP letters, or a UCA collation weighs them as one, while",
        "/// utf8mb4_general_ci weighs them all as U+FFFD): a name holding one is",
        "/// refused. Inclusive ranges, sorted.",
        "#[rustfmt::skip]",
        "pub(super) const UNSETTLED: &[(u32, u32)] = &[",
    ]
    rows([f"(0x{a:05X},0x{b:05X})," for a, b in ranges(unsettled)], 5)
    lines += ["];", ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="write nothing; fail if the file differs")
    ap.add_argument("--sample", type=int, default=40000, help="random strings to check")
    ap.add_argument("--unsettled", action="store_true",
                    help="print the supplementary characters no key counts right, as Rust ranges")
    ap.add_argument("--explain", action="store_true",
                    help="also list what each rule and dropped class is for (each left out in turn)")
    args = ap.parse_args()
    t0 = time.monotonic()
    log = lambda msg: print(msg, file=sys.stderr)  # noqa: E731

    ducet = Ducet()
    with private_mariadb() as db:
        version = db.scalar("SELECT VERSION()")
        have = {r[0] for r in db.query("SHOW COLLATION") if r}
        have |= {r[0] for r in db.query(
            "SELECT FULL_COLLATION_NAME FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY")}
        missing = [c for c in MARIADB if c not in have]
        if missing:
            log(f"MariaDB {version} lacks {missing}")
            return 1
        weights = weights_from_db(db, MARIADB)
        weights[MYSQL] = {cp: ducet.weigh(chr(cp)) for cp in BMP}
        log(f"weights: MariaDB {version} ({', '.join(MARIADB)}), DUCET {DUCET_VERSION}: "
            f"{time.monotonic() - t0:.1f}s")

        # Supplementary characters: general_ci weighs them all as U+FFFD.
        gen = weights["utf8mb4_general_ci"]
        supp = [cp for lo, hi in SUPP_RANGES for cp in range(lo, hi + 1)]
        fffd = sum(1 for cp in supp if gen[cp] == (0xFFFD,))
        ign = {coll: [cp for cp in supp if not weights[coll][cp]] for coll in MARIADB[1:]}
        log(f"supplementary: general_ci weighs {fffd} of {len(supp)} as U+FFFD; primary-ignorable: "
            + ", ".join(f"{c} {len(v)} (e.g. U+{v[0]:X})" for c, v in ign.items() if v))

        single, expand, drop, meta = build(weights, log)
        key = Key(single, expand, drop)
        key.unsettled = unsettled(weights)
        log(f"supplementary characters no key counts right: {len(key.unsettled)} in "
            f"{len(ranges(key.unsettled))} ranges ({sum(map(supplementary_compat, map(chr, key.unsettled)))} "
            "that normalize makes BMP ones, the others weighed as BMP ones by a UCA collation)")

        # Strings: a random sample, the examples, every DUCET contraction
        # and the single characters that make its weight.
        strings = sample_strings(meta, n=args.sample)
        contractions = sorted({"".join(map(chr, k)) for k in ducet.contractions})
        extra = ["straße", "strasse", "strase", "victim", "col·lega", "collega", "ŀ",
                 "\u0438\u0334\u0306", "\u0438", "\u0439", *contractions]
        by_w = {w: m for w, m in meta["groups"][MYSQL].items()}
        for k in ducet.contractions:
            w = ducet.table[k]
            seg = segment(w, by_w, lambda s: s) if w else []
            if seg is not None:
                extra.append("".join(map(chr, seg)))
        # Every character against the single characters that make its
        # weight, under each collation (`æ` and `ae`; `ٵ` and `ءا`).
        for coll in weights:
            g = {w: m for w, m in meta["groups"][coll].items() if w}
            for cp in BMP:
                w = weights[coll][cp]
                seg = segment(w, g, lambda s: s) if len(w) > 1 and not refused(chr(cp)) else None
                if not seg or len(seg) < 2:
                    continue
                made = "".join(map(chr, seg))
                extra += [chr(cp), made]
                # MariaDB keeps the first weights of a long expansion only:
                # `ﷺ` (NFKC: 18 letters and 3 spaces) is `صلى الله` to it.
                full, short = key.key(chr(cp)), key.key(made)
                if full and short and full != short and full.startswith(short):
                    log(f"{coll} truncates U+{cp:04X}: {full!r} is {short!r}")
                    if (full, short) not in key.truncate:
                        key.truncate.append((full, short))
                        extra += ["x" + chr(cp) + "y", "x" + made + "y"]
        strings = sorted(set(strings) | set(extra))
        weighed = db_weigh_strings(db, strings, MARIADB)
        weighed[MYSQL] = [ducet.weigh(s) for s in strings]
    log(f"weighed {len(strings)} strings: {time.monotonic() - t0:.1f}s")

    def problems(k: Key, refuse: bool = True) -> list[str]:
        k.unsettled = key.unsettled
        return (check_groups(k, meta["groups"]) + check_groups(k, meta["groups"], "v")
                + check_weighed(k, strings, weighed, refuse))

    unstable = [s for s in [*map(chr, BMP), *strings] for once in [key.collate(s)]
                if key.collate(once) != once]
    log(f"collate(collate(x)) != collate(x) for {len(unstable)} strings {unstable[:5]}")
    left = problems(key) + [f"not idempotent: {s!r}" for s in unstable]
    refusal = [p for p in problems(key, refuse=False) if p not in left]
    log(f"conflicts left: {len(left)}")
    for c in left:
        log("  " + c)
    log(f"conflicts no key can settle, for names holding one of those characters: "
        f"{len(refusal)} groups, e.g. {'; '.join(refusal[:2])}")
    if args.unsettled:
        print("// Supplementary characters no key counts right (inclusive ranges).")
        for a, b in ranges(key.unsettled):
            print(f"(0x{a:05X}, 0x{b:05X}),")
    if args.explain:
        quiet = lambda msg: None  # noqa: E731
        base = check_groups(Key(*build(weights, quiet, {})[:3], rules=frozenset()), meta["groups"])
        log(f"single characters a per-character map alone cannot keep together: {len(base)}")
        for c in base:
            log("  " + c)
        for name in sorted(RULES):
            found = problems(Key(single, expand, drop, RULES - {name}, key.truncate))
            log(f"without the rule {name}: {len(found)} conflicts, e.g.")
            for c in found[:6]:
                log("  " + c)
        for cp in FORCED_DROPS:
            s2, e2, d2, _ = build(weights, quiet, {k: v for k, v in FORCED_DROPS.items() if k != cp})
            found = problems(Key(s2, e2, d2, RULES, key.truncate))
            log(f"without dropping the class of U+{cp:04X}: {len(found)} conflicts, e.g.")
            for c in found[:6]:
                log("  " + c)

    versions = (f"MariaDB {version} ({', '.join(MARIADB)}); DUCET {DUCET_VERSION} "
                f"(pyuca 1.2) for MySQL 8's {MYSQL}")
    text = render_rust(single, expand, drop, key.truncate, key.unsettled, versions)
    log(f"table: {len(single)} single, {len(expand)} expansions, "
        f"{len(ranges(drop))} dropped ranges ({len(drop)} chars), {len(key.truncate)} truncations; "
        f"{len(text.encode())} bytes of source")
    if args.check:
        if OUT.read_text() != text:
            log(f"{OUT.relative_to(ROOT)} differs from what the weights give")
            return 1
    else:
        OUT.write_text(text)
    log(f"done: {time.monotonic() - t0:.1f}s")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
