//! The directory's bytes in shared data: fixed-width little endian, read on
//! every tick, so decoding checks lengths before it allocates.

use super::{Directory, LaneEntry, LiveConfig};
use crate::count::bytes::Reader;

const MAGIC: u32 = 0x7262_6431; // "rbd1"
const LIVE_BYTES: usize = 8 * 5 + 4 + 1;
const LANE_BYTES: usize = 8 * 4 + 4 + 1;

impl Directory {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(
            4 + 24 + 8 + self.live.len() * LIVE_BYTES + self.lanes.len() * LANE_BYTES,
        );
        v.extend_from_slice(&MAGIC.to_le_bytes());
        for x in [self.seed[0], self.seed[1], self.gen] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.extend_from_slice(&(self.live.len() as u32).to_le_bytes());
        v.extend_from_slice(&(self.lanes.len() as u32).to_le_bytes());
        for l in &self.live {
            for x in [l.instance, l.config, l.gen, l.born_ms, l.seen_ms] {
                v.extend_from_slice(&x.to_le_bytes());
            }
            v.extend_from_slice(&l.refs.to_le_bytes());
            v.push(u8::from(l.joined));
        }
        for e in &self.lanes {
            for x in [e.instance, e.fingerprint, e.first, e.last] {
                v.extend_from_slice(&x.to_le_bytes());
            }
            v.extend_from_slice(&e.tag.to_le_bytes());
            v.push(u8::from(e.table));
        }
        v
    }

    /// `None` for anything that is not a whole directory.
    pub fn decode(b: &[u8]) -> Option<Directory> {
        let mut r = Reader::new(b);
        if r.u32()? != MAGIC {
            return None;
        }
        let seed = [r.u64()?, r.u64()?];
        let gen = r.u64()?;
        let (n_live, n_lanes) = (r.u32()? as usize, r.u32()? as usize);
        // Lengths are checked against the bytes before anything is allocated.
        let need = n_live
            .checked_mul(LIVE_BYTES)?
            .checked_add(n_lanes.checked_mul(LANE_BYTES)?)?;
        if r.rest().len() != need {
            return None;
        }
        let mut live = Vec::with_capacity(n_live);
        for _ in 0..n_live {
            live.push(LiveConfig {
                instance: r.u64()?,
                config: r.u64()?,
                gen: r.u64()?,
                born_ms: r.u64()?,
                seen_ms: r.u64()?,
                refs: r.u32()?,
                joined: r.u8()? != 0,
            });
        }
        let mut lanes = Vec::with_capacity(n_lanes);
        for _ in 0..n_lanes {
            lanes.push(LaneEntry {
                instance: r.u64()?,
                fingerprint: r.u64()?,
                first: r.u64()?,
                last: r.u64()?,
                tag: r.u32()?,
                table: r.u8()? != 0,
            });
        }
        Some(Directory {
            seed,
            gen,
            live,
            lanes,
        })
    }
}
