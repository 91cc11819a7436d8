"""The request bodies the chat-request oracle sends every reader: each
field the filter reads (`stream`, `stream_options.include_usage`,
`max_tokens`, `max_completion_tokens`) spelled, repeated, typed and encoded
every way a caller might try to make one reader read what another does not.
"""
from __future__ import annotations

import itertools
import json

MESSAGES = '"messages":[{"role":"user","content":"hi"}]'

# Values a boolean field may be given: JSON's, and what lax readers coerce.
TRUTHS = ["true", "false", "null", "0", "1", "2", "-0.0", "0.0", '""', '"true"',
          '"false"', '"no"', '"yes"', '"0"', '"1"', '"on"', '"off"', '"TRUE"', "[]",
          "{}", "[0]", '"t"', "1e0"]
# Values a ceiling may be given.
NUMBERS = ["100", "100.5", "-1", "0", "1e3", '"250"', '" 250 "', '"0x10"', '"1e3"',
           "true", "null", '"abc"', "1e99", "99999999999", '"Infinity"', "[]", '""']
# Ways to name a field: as is, escaped, in other cases, by Unicode folding.
def spellings(name: str) -> list[str]:
    out = [name, name.upper(), name.capitalize(),
           "".join(f"\\u{ord(c):04x}" if i == 1 else c for i, c in enumerate(name))]
    if "s" in name:
        out.append(name.replace("s", "\u017f", 1))  # ſ: Go folds it to s
    if "k" in name:
        out.append(name.replace("k", "\u212a", 1))  # the Kelvin sign
    return out


def bodies() -> list[bytes]:
    out: list[str] = []
    # stream's values, with and without options.
    for v in TRUTHS:
        out.append(f'{{"model":"m",{MESSAGES},"stream":{v}}}')
        out.append(f'{{"model":"m","stream":{v},"stream_options":{{"include_usage":true}}}}')
        out.append(f'{{"model":"m","stream":true,"stream_options":{{"include_usage":{v}}}}}')
    # ceilings, alone and side by side.
    for a in NUMBERS:
        out.append(f'{{"model":"m","max_tokens":{a}}}')
        out.append(f'{{"model":"m","stream":true,"max_completion_tokens":{a}}}')
    for a, b in itertools.product(["1", "500", '"800"'], ["2000", "null", '"5"']):
        out.append(f'{{"model":"m","max_tokens":{a},"max_completion_tokens":{b}}}')
    # spellings, alone and beside the plain name.
    for name, value in [("stream", "true"), ("max_tokens", "900"),
                        ("max_completion_tokens", "900"), ("stream_options",
                        '{"include_usage":false}')]:
        for s in spellings(name):
            key = json.dumps(s, ensure_ascii=False)[1:-1] if "\\u" not in s else s
            out.append(f'{{"model":"m","stream":true,"{key}":{value}}}')
            out.append(f'{{"model":"m","{key}":{value}}}')
    for s in spellings("include_usage"):
        out.append(f'{{"stream":true,"stream_options":{{"{s}":true}}}}')
    # duplicates, in both orders.
    for name, a, b in [("stream", "false", "true"), ("max_tokens", "1", "5000"),
                       ("stream_options", '{"include_usage":true}', '{"include_usage":false}')]:
        out.append(f'{{"{name}":{a},"model":"m","{name}":{b}}}')
        out.append(f'{{"{name}":{b},"model":"m","{name}":{a}}}')
    out.append('{"stream":true,"stream_options":{"include_usage":false,"include_usage":true}}')
    # options of other shapes, and other members kept.
    for opts in ["null", '"yes"', "[]", "{}", '{"include_usage":true,"x":[1,{"y":"}"}]}',
                 '{"continuous_usage_stats":true}']:
        out.append(f'{{"stream":true,"stream_options":{opts},"model":"m"}}')
    # documents at the edges of JSON.
    out += ['{}', '{"stream":true}   ', ' \n\t{"stream":true}', '{"stream":true,}',
            '{"stream":true', '[{"stream":true}]', '"stream"', "stream=true",
            '{"stream":true}{"stream":false}', '{"a":NaN,"stream":true}',
            '{"a":Infinity,"stream":true}', '{"stream":true,"a":"\u0000"}',
            '{"stream":true,"a":"\\ud800"}', '{"stream":true,"a":1.5e999}',
            '{"a":' + "[" * 600 + "]" * 600 + ',"stream":true}']
    encoded = [s.encode() for s in out]
    # byte-order marks and other encodings of one streaming request.
    plain = '{"model":"m","stream":true}'
    encoded += [b"\xef\xbb\xbf" + plain.encode(), plain.encode("utf-16"),
                plain.encode("utf-16-le"), plain.encode("utf-16-be"),
                plain.encode("utf-32"), b'{"stream":true,"a":"\xff"}']
    return encoded
