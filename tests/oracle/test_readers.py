"""The sign-in counter reads the account as the servers do (issue 36).

Every request of the corpus (tests/oracle/corpus.py) goes, byte for byte,
to the filter's reader (the request path over the mock host,
examples/account_oracle) and to each framework's own server
(tests/oracle/readers). The property: whenever a framework's code passes
account X on to authentication, the filter either refused the request or
counted it under the key of X. Anything else is an attacker's fresh
counter for an account the server signs in."""
from __future__ import annotations

from collections import Counter

from corpus import Case, corpus


def violations(case_list: list[Case], verdicts: list[dict], reads: list, keys: dict) -> list:
    out = []
    for case, verdict, read in zip(case_list, verdicts, reads):
        if read is None or "refused" in verdict:
            continue
        for x in read if isinstance(read, list) else [read]:
            if keys[x].get("key") != verdict.get("key"):
                out.append((case, x, keys[x], verdict))
    return out


def test_the_corpus_is_the_size_it_says():
    cases = corpus()
    assert len(cases) > 2000, len(cases)
    assert len({c.name for c in cases}) > 300


def test_whatever_a_framework_reads_the_filter_refuses_or_counts_under_it(readers, tool):
    cases = corpus()
    verdicts = tool.ask([c.tool_line() for c in cases])
    raws = [c.raw() for c in cases]
    refused = Counter(v.get("refused", "counted") for v in verdicts)
    print(f"\ncorpus: {len(cases)} requests; the filter: {dict(refused)}")
    found = []
    for r in readers:
        reads = r.read_all(raws)
        names = sorted({x for read in reads if read is not None
                        for x in (read if isinstance(read, list) else [read])})
        keys = dict(zip(names, tool.key(names)))
        read_any = sum(read is not None for read in reads)
        bad = violations(cases, verdicts, reads, keys)
        print(f"{r.name}: read an account from {read_any} of {len(cases)}; "
              f"{len(bad)} counted elsewhere")
        found += [(r.name, *b) for b in bad]
    assert readers, "no reader started"
    shown = "\n".join(
        f"  {name}: {case.name}: {case.path} {case.headers} {case.body[:80]!r} -> "
        f"the framework reads {x!r} (key {k}), the filter counted {v}"
        for name, case, x, k, v in found[:40])
    assert not found, f"{len(found)} requests counted off their account:\n{shown}"
