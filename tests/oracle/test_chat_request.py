"""Issue 37: the filter's reading of a chat request against the readers of
the servers behind OpenAI-compatible APIs — pydantic in lax mode over
Python's JSON parser (vLLM's request model, as FastAPI hands it the body),
Go's encoding/json (case-insensitive field names, as Ollama's server reads
them), JavaScript's JSON.parse with truthiness (Express' json()). The
readers, not our reading of them, say what the upstream reads.

For every body of tests/oracle/chat/chat_corpus.py the filter either refuses it,
or sends on a body (rewritten to ask for the usage when it streams) of
which every reader that accepted the caller's body reads:
- that it streams exactly when it read so in the caller's body;
- the usage asked for whenever it streams (so the answer names its cost);
- a ceiling no larger than what the filter reserved (within the limit).
"""
from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE / "chat"))
from chat_corpus import bodies  # noqa: E402

LIMIT = 4_000_000_000  # examples/chat_oracle.rs


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool | None = True  # vLLM's default


class ChatRequest(BaseModel):
    """vLLM's ChatCompletionRequest, the fields read here."""
    model_config = ConfigDict(extra="allow")
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None

    @model_validator(mode="after")
    def options_need_a_stream(self):
        if self.stream_options is not None and not self.stream:
            raise ValueError("Stream options can only be defined when `stream=True`.")
        return self


def pydantic_reads(body: bytes) -> dict:
    try:
        r = ChatRequest.model_validate(json.loads(body))
    except (ValueError, ValidationError, RecursionError) as e:
        return {"error": " ".join(str(e).split())}
    reading = {"stream": bool(r.stream),
               "include_usage": bool(r.stream and r.stream_options
                                     and r.stream_options.include_usage)}
    ceiling = r.max_completion_tokens or r.max_tokens
    if ceiling is not None:
        reading["ceiling"] = ceiling
    return reading


def lines_of(cmd: list[str], inputs: list[bytes]) -> list[dict]:
    text = "".join(base64.b64encode(b).decode() + "\n" for b in inputs)
    out = subprocess.run(cmd, input=text, capture_output=True, text=True, timeout=600,
                         check=True).stdout
    return [json.loads(l) for l in out.splitlines()]


@pytest.fixture(scope="module")
def readers():
    go = subprocess.run(["bash", str(HERE / "chat" / "install.sh")], capture_output=True,
                        text=True, check=True).stdout.strip().splitlines()[-1]
    return {
        "pydantic": lambda bs: [pydantic_reads(b) for b in bs],
        "go": lambda bs: lines_of([go], bs),
        "node": lambda bs: lines_of(["node", str(HERE / "chat" / "node.mjs")], bs),
    }


@pytest.fixture(scope="module")
def filter_reads():
    subprocess.run(["cargo", "build", "-q", "--example", "chat_oracle"], cwd=ROOT, check=True)
    tool = ROOT / "target" / "debug" / "examples" / "chat_oracle"
    return lambda bs: lines_of([str(tool)], bs)


def test_every_reader_reads_what_the_filter_charges(readers, filter_reads):
    corpus = bodies()
    ours = filter_reads(corpus)
    callers = {name: read(corpus) for name, read in readers.items()}
    forwarded = [i for i, f in enumerate(ours) if "sent_b64" in f]
    sent = [base64.b64decode(ours[i]["sent_b64"]) for i in forwarded]
    upstream = {name: dict(zip(forwarded, read(sent))) for name, read in readers.items()}
    wrong, refused_upstream = [], Counter()
    for i in forwarded:
        f = ours[i]
        for name in readers:
            before, after = callers[name][i], upstream[name][i]
            if "error" in before:
                continue  # the reader refuses the caller's own body
            what = f"{name} on {corpus[i][:90]!r}"
            if "error" in after:
                if name == "pydantic" and not before["stream"] and "Stream options" in after["error"]:
                    # Streams to another reader: asked for its usage, which
                    # this one refuses without a stream: nothing delivered.
                    refused_upstream[name] += 1
                    continue
                wrong.append(f"{what}: the body sent on is refused: {after['error']}")
                continue
            if after["stream"] != before["stream"]:
                wrong.append(f"{what}: streams {before['stream']} as sent, {after['stream']} now")
            if after["stream"] and not after["include_usage"]:
                wrong.append(f"{what}: streams without the usage asked for")
            ceiling = after.get("ceiling")
            if isinstance(ceiling, (int, float)) and min(ceiling, LIMIT) > f["reserved"]:
                wrong.append(f"{what}: allows {ceiling}, {f['reserved']} reserved")
    refusals = Counter(f["refused"] for f in ours if "refused" in f)
    # Refused by the filter though every reader read it alike: a cost of
    # certainty, said, not hidden.
    alike = sum(1 for i, f in enumerate(ours) if "refused" in f
                and all("error" not in callers[n][i] for n in readers)
                and len({json.dumps(callers[n][i], sort_keys=True) for n in readers}) == 1)
    print(f"\n{len(corpus)} bodies: {len(forwarded)} sent on, refused {dict(refusals)}; "
          f"{alike} refused though every reader read them alike; "
          f"refused upstream after the rewrite: {dict(refused_upstream)}")
    for name in readers:
        accepted = sum(1 for r in callers[name] if "error" not in r)
        print(f"  {name}: accepts {accepted} of the callers' bodies")
    assert not wrong, "\n".join(wrong[:40]) + f"\n({len(wrong)} in all)"
    # The plain requests are read, not refused.
    for plain in (0, 1):
        assert "sent_b64" in ours[plain], (corpus[plain], ours[plain])
