"""The account key against a real database's collations.

Applications look accounts up in a database whose collation equates more
spellings than NFKC_Casefold: every two names the database weighs alike
sign in as one account, so they must share one key (docs/collations.md). A
private MariaDB (mariadb.py; scripts/install-mariadb.sh) weighs, under
`utf8mb4_general_ci`, `utf8mb4_unicode_520_ci` and `utf8mb4_uca1400_ai_ci`
(and the DUCET 9.0.0 of MySQL 8's `utf8mb4_0900_ai_ci`, when pyuca is
installed):

- every BMP character: characters weighed alike share a key, alone and
  between two letters; a primary-ignorable one is as if absent;
- `victim` against every one-character substitution and insertion the
  database signs in as `victim` (the BMP and planes 1-3 and 14);
- every character the UCA weighs as two or three others (`æ`, `ß`);
- a random sample of short names over the characters collations treat
  specially, grouped by their weights.

The filter's key is examples/account_oracle's (`{"fold": name}` →
`{"key": …}` or `{"refused": …}`; a refused name is skipped), at
$RATEBOUND_ACCOUNT_ORACLE, by default target/debug/examples/account_oracle.
"""

from __future__ import annotations

import collections
import json
import os
import random
import subprocess
import unicodedata
from pathlib import Path

import pytest

import processes
from mariadb import available, private_mariadb

ROOT = Path(__file__).resolve().parents[2]
TOOL = Path(os.environ.get("RATEBOUND_ACCOUNT_ORACLE",
                           ROOT / "target" / "debug" / "examples" / "account_oracle"))
MARIADB = ["utf8mb4_general_ci", "utf8mb4_unicode_520_ci", "utf8mb4_uca1400_ai_ci"]
MYSQL = "utf8mb4_0900_ai_ci"
BMP = [cp for cp in range(0x10000) if not 0xD800 <= cp <= 0xDFFF]
SUPP_RANGES = [(0x10000, 0x3FFFF), (0xE0000, 0xE0FFF)]
AROUND = "v"


def supplementary_compat(c: str) -> bool:
    """A supplementary character NFKC_Casefold makes a BMP one (`𝐚` is `a`)."""
    if ord(c) <= 0xFFFF:
        return False
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", c).casefold())
    return any(ord(x) <= 0xFFFF for x in folded)


# ---------------------------------------------------------------------------
# The filter's key.


class Keys:
    """examples/account_oracle: the key of each name (None: refused)."""

    def __init__(self) -> None:
        if not TOOL.exists():
            pytest.fail(f"{TOOL} is missing: cargo build --example account_oracle "
                        "(or set RATEBOUND_ACCOUNT_ORACLE)")
        self.cache: dict[str, str | None] = {}

    def __call__(self, names) -> dict[str, str | None]:
        todo = sorted({n for n in names if n not in self.cache})
        if todo:
            # Two processes: the machine has two cores.
            halves = [todo[: len(todo) // 2], todo[len(todo) // 2:]]
            procs = [processes.popen([str(TOOL)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
                     for h in halves if h]
            for proc, half in zip(procs, halves):
                answers = proc.communicate(
                    "".join(json.dumps({"fold": n}) + "\n" for n in half).encode(), timeout=300
                )[0].decode().splitlines()
                assert proc.returncode == 0 and len(answers) == len(half), (proc.returncode,
                                                                           len(answers))
                for n, a in zip(half, answers):
                    self.cache[n] = json.loads(a).get("key")
        return {n: self.cache[n] for n in names}


@pytest.fixture(scope="module")
def keys() -> Keys:
    return Keys()


# ---------------------------------------------------------------------------
# The database's weights.


def units(hexw: str) -> tuple[int, ...]:
    return tuple(int(hexw[i:i + 4], 16) for i in range(0, len(hexw), 4))


def utf32(s: str) -> str:
    if not s:
        return "_utf8mb4''"
    return "CONVERT(_utf32 0x%s USING utf8mb4)" % "".join("%08X" % ord(c) for c in s)


class Weights:
    """Primary weights from the server (and the DUCET for MySQL 8)."""

    def __init__(self, db) -> None:
        self.db = db
        sql = ["SET SESSION max_recursive_iterations = 2000000;",
               "CREATE TABLE ch (cp INT PRIMARY KEY, c VARCHAR(1) CHARACTER SET utf8mb4 "
               "COLLATE utf8mb4_bin NOT NULL);"]
        for lo, hi in [(0, 0xFFFF), *SUPP_RANGES]:
            sql.append(
                f"INSERT INTO ch WITH RECURSIVE s(n) AS (SELECT {lo} UNION ALL SELECT n + 1 "
                f"FROM s WHERE n < {hi}) SELECT n, CONVERT(CHAR(n USING utf32) USING utf8mb4) "
                "FROM s WHERE n NOT BETWEEN 0xD800 AND 0xDFFF;")
        db.query("\n".join(sql))
        self.bmp: dict[str, dict[int, tuple[int, ...]]] = {}
        self._unsettled: set[int] | None = None
        self.ducet = None
        try:
            import pyuca  # noqa: F401

            self.ducet = Ducet(Path(pyuca.__file__).parent / "allkeys-9.0.0.txt")
        except ImportError:
            pass

    def unsettled(self) -> set[int]:
        """Supplementary characters no key counts right: general_ci weighs
        every one as U+FFFD (so one key for all, and the UCA ignores some:
        none), while normalize or a UCA collation makes it a BMP character
        (`𝐚` is `a`, `🅼` is `m` to the UCA). See
        test_a_supplementary_character_no_key_counts_right."""
        if self._unsettled is None:
            out = set()
            for coll in MARIADB[1:]:
                bmp = {w for w in self.chars(coll).values() if w}
                rows = self.db.query(
                    f"SELECT cp, HEX(WEIGHT_STRING(c COLLATE {coll})) FROM ch WHERE cp > 65535")
                for cp, hexw in rows:
                    w = units(hexw)
                    if w in bmp or any(w[:k] in bmp and w[k:] in bmp for k in range(1, len(w))):
                        out.add(int(cp))
            for lo, hi in SUPP_RANGES:
                out.update(cp for cp in range(lo, hi + 1) if supplementary_compat(chr(cp)))
            self._unsettled = out
        return self._unsettled

    def settled(self, s: str) -> bool:
        return not any(ord(c) in self.unsettled() for c in s)

    def chars(self, coll: str) -> dict[int, tuple[int, ...]]:
        if coll not in self.bmp:
            if coll == MYSQL:
                self.bmp[coll] = {cp: self.ducet.weigh(chr(cp)) for cp in BMP}
            else:
                rows = self.db.query(
                    f"SELECT cp, HEX(WEIGHT_STRING(c COLLATE {coll})) FROM ch WHERE cp < 65536")
                self.bmp[coll] = {int(cp): units(w) for cp, w in rows}
        return self.bmp[coll]

    def strings(self, coll: str, strings: list[str]) -> list[tuple[int, ...]]:
        if coll == MYSQL:
            return [self.ducet.weigh(s) for s in strings]
        self.db.query("DROP TABLE IF EXISTS st; CREATE TABLE st (i INT PRIMARY KEY, "
                      "s VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL);")
        for lo in range(0, len(strings), 2000):
            self.db.query("INSERT INTO st VALUES " + ",".join(
                f"({lo + i},{utf32(s)})" for i, s in enumerate(strings[lo:lo + 2000])))
        rows = self.db.query(f"SELECT HEX(WEIGHT_STRING(s COLLATE {coll})) FROM st ORDER BY i")
        return [units(r[0]) for r in rows]


class Ducet:
    """MySQL 8's utf8mb4_0900_ai_ci at primary strength: DUCET 9.0.0 (pyuca
    1.2's allkeys), contiguous contractions, Hangul as jamo."""

    def __init__(self, path: Path) -> None:
        self.table: dict[tuple[int, ...], tuple[int, ...]] = {}
        for line in path.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if not line or line.startswith("@"):
                continue
            chars, elems = line.split(";", 1)
            prim = [int(e[1:5], 16) for e in elems.strip().strip("[]").split("][")]
            self.table[tuple(int(x, 16) for x in chars.split())] = tuple(p for p in prim if p)
        self.longest = max(len(k) for k in self.table)

    def weigh(self, s: str) -> tuple[int, ...]:
        cps = [ord(j) for c in s for j in (unicodedata.normalize("NFD", c)
                                           if 0xAC00 <= ord(c) <= 0xD7A3 else c)]
        out: list[int] = []
        i = 0
        while i < len(cps):
            for n in range(min(self.longest, len(cps) - i), 0, -1):
                w = self.table.get(tuple(cps[i:i + n]))
                if w is not None:
                    out.extend(w)
                    i += n
                    break
            else:  # implicit: unique to the code point
                out.extend((0xFBC0 + (cps[i] >> 15), (cps[i] & 0x7FFF) | 0x8000))
                i += 1
        return tuple(out)


@pytest.fixture(scope="module")
def weights():
    if not available():
        pytest.fail("no MariaDB server: run scripts/install-mariadb.sh")
    with private_mariadb() as db:
        yield Weights(db)


def collations(weights: Weights) -> list[str]:
    return MARIADB + ([MYSQL] if weights.ducet else [])


COLLATIONS = [*MARIADB, MYSQL]


@pytest.fixture(params=COLLATIONS)
def coll(request, weights) -> str:
    if request.param == MYSQL and weights.ducet is None:
        pytest.skip("pyuca 1.2 (DUCET 9.0.0) is not installed: .venv/bin/pip install pyuca==1.2")
    return request.param


def refused_char(c: str) -> bool:
    return unicodedata.category(c) == "Cc"


def disagreements(groups, keys: Keys, limit: int = 10) -> list[str]:
    """Groups (of names the database weighs alike) whose keys differ."""
    names = [n for g in groups for n in g]
    k = keys(names)
    bad = []
    for g in groups:
        by_key = collections.defaultdict(list)
        for n in g:
            if k[n] is not None:
                by_key[k[n]].append(n)
        if len(by_key) > 1:
            bad.append(" | ".join(", ".join(repr(n) for n in ns[:3]) for ns in by_key.values()))
    return bad[:limit] + ([f"… {len(bad) - limit} more"] if len(bad) > limit else [])


# ---------------------------------------------------------------------------
# The tests.


def test_characters_weighed_alike_share_a_key(coll, weights, keys):
    w = weights.chars(coll)
    groups = collections.defaultdict(list)
    for cp in BMP:
        if not refused_char(chr(cp)):
            groups[w[cp]].append(chr(cp))
    alone = [g for wt, g in groups.items() if wt and len(g) > 1]
    assert len(alone) > 100, "the collation equates next to nothing: not a real weight table?"
    # Between two letters too, where trimming does not hide a space; a
    # primary-ignorable character is as if it were not there.
    around = [[AROUND + c + AROUND for c in g] for g in alone]
    around.append([AROUND * 2] + [AROUND + c + AROUND for c in groups.get((), [])])
    bad = disagreements(alone + around, keys)
    assert not bad, f"{coll}: characters it weighs alike have different keys:\n" + "\n".join(bad)


def test_victim_and_every_spelling_the_database_signs_in_as_victim(coll, weights, keys):
    """One-character substitutions and insertions, over the BMP and the
    supplementary planes, that the database weighs as `victim`."""
    name = "victim"
    if coll == MYSQL:
        target = weights.ducet.weigh(name)
        letters = {weights.ducet.weigh(c) for c in name} | {()}
        chars = [chr(cp) for cp in BMP if weights.ducet.weigh(chr(cp)) in letters]
        cands = [name[:i] + c + name[i + j:] for i in range(len(name) + 1) for j in (0, 1)
                 for c in chars if i + j <= len(name)]
        same = [s for s in cands if weights.ducet.weigh(s) == target]
    else:
        rows = weights.db.query(
            "WITH RECURSIVE p(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM p WHERE i < 6), "
            "e(j) AS (SELECT 0 UNION ALL SELECT 1) "
            f"SELECT HEX(CONVERT(x USING utf32)) FROM (SELECT CONCAT(LEFT('{name}', p.i), ch.c, "
            f"SUBSTRING('{name}', p.i + e.j + 1)) COLLATE utf8mb4_bin AS x FROM p, e, ch "
            "WHERE p.i + e.j <= 6) AS cand "
            f"WHERE x COLLATE {coll} = _utf8mb4'{name}' COLLATE {coll}")
        same = [bytes.fromhex(r[0]).decode("utf-32-be") for r in rows]
    same = [s for s in same if weights.settled(s)]
    # The brief's examples, where the collation equates them.
    expected = {"utf8mb4_general_ci": ["vıctim", "victím"]}.get(
        coll, ["victím", "vic\u0334tim", "victim\u0301"])
    missing = [s for s in expected if s not in same]
    assert not missing, f"{coll}: the database no longer equates {missing} with {name}"
    bad = disagreements([[name, *same]], keys)
    assert not bad, f"{coll}: spellings of {name} with another key:\n" + "\n".join(bad)


def test_expansions_share_a_key(coll, weights, keys):
    """A character weighed as two or three others in a row (`æ` = `ae`)
    shares a key with them, alone and inside a name."""
    w = weights.chars(coll)
    single = {}
    for cp in BMP:
        if w[cp] and not refused_char(chr(cp)):
            single.setdefault(w[cp], chr(cp))
    groups = [["straße", "strasse"], ["æ", "ae"], ["œ", "oe"]]
    for cp in BMP:
        wt = w[cp]
        if len(wt) < 2 or refused_char(chr(cp)):
            continue
        for cut in range(1, len(wt)):
            a, b = single.get(wt[:cut]), single.get(wt[cut:])
            if a and b and chr(cp) not in (a, b):
                groups.append([chr(cp), a + b])
                break
    # Only what the database itself equates.
    flat = [s for g in groups for s in (g + [f"x{s}y" for s in g])]
    ws = dict(zip(flat, weights.strings(coll, flat)))
    checked = []
    for g in groups:
        for around in ("", "x"):
            names = [around + s + ("y" if around else "") for s in g]
            if len({ws[n] for n in names}) == 1:
                checked.append(names)
    if coll != "utf8mb4_general_ci":
        assert len(checked) > 50, f"{coll}: few expansions ({len(checked)})"
        assert ["straße", "strasse"] in checked
    bad = disagreements(checked, keys)
    assert not bad, f"{coll}: expansions with another key:\n" + "\n".join(bad)


def sample(weights: Weights, n: int, seed: int = 11) -> list[str]:
    """Short names over characters collations treat specially."""
    rnd = random.Random(seed)
    interesting = set()
    for coll in MARIADB:
        g = collections.defaultdict(list)
        for cp, wt in weights.chars(coll).items():
            g[wt].append(cp)
        for wt, members in g.items():
            if 1 < len(members) < 40 or not wt:
                interesting.update(members)
    pool = sorted(cp for cp in interesting if not refused_char(chr(cp)))
    base = [ord(c) for c in "victimalsbde"] + [
        0x20, 0xB7, 0x334, 0x301, 0x306, 0x345, 0x37A, 0x438, 0x439, 0xDF, 0xE6, 0x3B1, 0x3B9,
        0x1FB3, 0xE01, 0xE40, 0xE48, 0xEC0, 0xE81, 0x1100, 0x1161, 0x11A8, 0xAC00, 0xFE70,
        0x1F600, 0x1D167, 0xFFFD, 0x2000, 0xA0, 0x3000]
    out = set()
    while len(out) < n:
        s = "".join(chr(rnd.choice(base) if rnd.random() < 0.6 else rnd.choice(pool))
                    for _ in range(rnd.randint(1, 5)))
        out.add(s)
    return sorted(out)


def test_names_weighed_alike_share_a_key(coll, weights, keys):
    names = [n for n in sample(weights, 12000) if weights.settled(n)]
    ws = weights.strings(coll, names)
    groups = collections.defaultdict(list)
    for n, w in zip(names, ws):
        groups[w].append(n)
    alike = [g for g in groups.values() if len(g) > 1]
    assert len(alike) > 100
    bad = disagreements(alike, keys)
    assert not bad, f"{coll}: names it weighs alike have different keys:\n" + "\n".join(bad)


def test_a_supplementary_character_no_key_counts_right_is_refused(weights, keys):
    """general_ci weighs every supplementary character as U+FFFD (and the
    UCA ignores some), normalize makes 𝐚 `a` and the UCA weighs 🅼 as `m`:
    no key counts both right, so a name holding one is refused."""
    pairs = [["a😀", "a𝐚"], ["😀bob", "𝐛bob"], ["victi😀", "victi🅼"]]
    names = [n for p in pairs for n in p]
    ws = weights.strings("utf8mb4_general_ci", names)
    assert all(ws[i] == ws[i + 1] for i in range(0, len(names), 2))
    assert weights.strings("utf8mb4_unicode_520_ci", ["victim", "victi🅼"]) == \
        weights.strings("utf8mb4_unicode_520_ci", ["victim", "victim"])
    bad = disagreements(pairs + [["victim", "victi🅼"]], keys)
    assert not bad, "\n".join(bad)
    k = keys(["a𝐚", "𝐛bob", "victi🅼", "a😀"])
    assert [k[n] is None for n in ["a𝐚", "𝐛bob", "victi🅼", "a😀"]] == [True, True, True, False], k
