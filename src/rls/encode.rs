//! A `RateLimitRequest` written straight from borrowed descriptors: the
//! bytes prost writes for [`super::proto::RateLimitRequest`] (proto3: a
//! field at its default is left out, a present message is written even
//! when empty), without building the owned message first (a `String` per
//! entry, on every sign-in).

use super::{wire, DescriptorSpec};

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A length-delimited field of `len` bytes, its tag and length included.
fn delimited_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

fn str_len(s: &str) -> usize {
    if s.is_empty() {
        0
    } else {
        delimited_len(s.len())
    }
}

fn uint_len(v: u64) -> usize {
    if v == 0 {
        0
    } else {
        1 + varint_len(v)
    }
}

fn put_head(out: &mut Vec<u8>, tag: u8, len: usize) {
    out.push(tag);
    put_varint(out, len as u64);
}

fn put_str(out: &mut Vec<u8>, tag: u8, s: &str) {
    if !s.is_empty() {
        put_head(out, tag, s.len());
        out.extend_from_slice(s.as_bytes());
    }
}

fn put_uint(out: &mut Vec<u8>, tag: u8, v: u64) {
    if v != 0 {
        out.push(tag);
        put_varint(out, v);
    }
}

fn entry_len((k, v): &(&str, &str)) -> usize {
    str_len(k) + str_len(v)
}

/// The override's unit as a varint: `wire` numbers are 1 to 7.
fn unit_of(d: &DescriptorSpec) -> Option<(u64, u64)> {
    d.limit.map(|o| {
        (
            u64::from(o.requests_per_unit),
            u64::try_from(wire(o.unit)).unwrap_or(0),
        )
    })
}

fn descriptor_len(d: &DescriptorSpec) -> usize {
    let entries: usize = d.entries.iter().map(|e| delimited_len(entry_len(e))).sum();
    let limit = unit_of(d).map_or(0, |(n, u)| delimited_len(uint_len(n) + uint_len(u)));
    entries + limit + delimited_len(uint_len(d.hits_addend))
}

/// The encoded `RateLimitRequest` for `domain` and `descriptors`
/// (`hits_addend` 0: each descriptor carries its own).
pub(crate) fn request(domain: &str, descriptors: &[DescriptorSpec<'_>]) -> Vec<u8> {
    let sizes: smallvec::SmallVec<[usize; 8]> = descriptors.iter().map(descriptor_len).collect();
    let total = str_len(domain) + sizes.iter().map(|&n| delimited_len(n)).sum::<usize>();
    let mut out = Vec::with_capacity(total);
    put_str(&mut out, 0x0a, domain);
    for (d, &size) in descriptors.iter().zip(&sizes) {
        put_head(&mut out, 0x12, size);
        for e in d.entries {
            put_head(&mut out, 0x0a, entry_len(e));
            put_str(&mut out, 0x0a, e.0);
            put_str(&mut out, 0x12, e.1);
        }
        if let Some((n, u)) = unit_of(d) {
            put_head(&mut out, 0x12, uint_len(n) + uint_len(u));
            put_uint(&mut out, 0x08, n);
            put_uint(&mut out, 0x10, u);
        }
        put_head(&mut out, 0x1a, uint_len(d.hits_addend));
        put_uint(&mut out, 0x08, d.hits_addend);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::{proto, Override, Unit};
    use super::*;
    use prost::Message;

    /// The owned message prost encodes: what this module writes by hand.
    fn by_prost(domain: &str, descriptors: &[DescriptorSpec<'_>]) -> Vec<u8> {
        proto::RateLimitRequest {
            domain: domain.to_owned(),
            descriptors: descriptors
                .iter()
                .map(|d| proto::RateLimitDescriptor {
                    entries: d
                        .entries
                        .iter()
                        .map(|(key, value)| proto::DescriptorEntry {
                            key: (*key).to_owned(),
                            value: (*value).to_owned(),
                        })
                        .collect(),
                    limit: d.limit.map(|o| proto::RateLimitOverride {
                        requests_per_unit: o.requests_per_unit,
                        unit: wire(o.unit),
                    }),
                    hits_addend: Some(proto::UInt64Value {
                        value: d.hits_addend,
                    }),
                })
                .collect(),
            hits_addend: 0,
        }
        .encode_to_vec()
    }

    #[test]
    fn the_bytes_are_the_ones_prost_writes() {
        let long = "v".repeat(300);
        let entry_sets: [&[(&str, &str)]; 5] = [
            &[],
            &[("bound", "login.attempts")],
            &[
                ("bound", "login.attempts"),
                ("account", "v0123456789abcdef"),
            ],
            &[("", ""), ("k", ""), ("", "v")],
            &[("bound", &long), ("window", "29371")],
        ];
        let limits = [
            None,
            Some(Override {
                requests_per_unit: 0,
                unit: Unit::Second,
            }),
            Some(Override {
                requests_per_unit: 5,
                unit: Unit::Minute,
            }),
            Some(Override {
                requests_per_unit: u32::MAX,
                unit: Unit::Week,
            }),
        ];
        for domain in ["", "benchsignin", &long] {
            for entries in entry_sets {
                for limit in limits {
                    for hits in [0, 1, 127, 128, 1 << 40, u64::MAX] {
                        let one = DescriptorSpec {
                            entries,
                            limit,
                            hits_addend: hits,
                        };
                        for specs in [&[][..], &[one], &[one, one, one, one]] {
                            assert_eq!(
                                request(domain, specs),
                                by_prost(domain, specs),
                                "{domain:.8} {entries:?} {limit:?} {hits} ×{}",
                                specs.len()
                            );
                        }
                    }
                }
            }
        }
    }
}
