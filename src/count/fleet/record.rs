//! A node's fleet record in shared data: the sync lease and the heartbeat
//! that counts the nodes.

use crate::count::bytes::{read_u32, read_u64};

/// A node's fleet record in shared data, one per configuration instance:
/// which root context syncs (a lease every context may claim when it
/// runs out: one syncing thread per node, not per worker), how many
/// nodes the service last counted, and whether it answers.
///
/// Nodes are counted with a heartbeat key in the service: each node adds 1
/// to it once per clock minute, and reads it with every sync. Early in a
/// minute few nodes have added theirs, so the count is the larger of this
/// minute's and the last one seen of the minute before; a node gone is
/// still counted for up to two minutes (its peers then take a smaller
/// share alone, never a larger one). The count never falls back to the
/// configured guess because it is old: a long outage keeps the last one.
///
/// A node adds its 1 together with 1 to its own key (its stable node id),
/// in one call, after reading that own key at 0 this minute: a restarted
/// node (its shared data gone) finds its 1 already added and is not counted
/// twice, and an add that timed out is read back before it is tried again
/// (neither counted twice nor missed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Record {
    /// The syncing context's id, its configuration's generation (a newer
    /// configuration takes the lease at once: the superseded one only
    /// serves connections that drain), and when its lease ends.
    pub owner: u64,
    pub gen: u64,
    pub until_ms: u64,
    /// The heartbeat's clock minute and its counts: this minute's as last
    /// read, and the minute before's.
    pub minute: u64,
    pub cur: u32,
    pub prev: u32,
    /// The minute this node last added its 1 (0: never).
    pub beat: u64,
    /// The minute this node's own key was last read at 0 (0: never): from
    /// then on in that minute its 1 is still to add.
    pub asked: u64,
    /// When a sync call was last answered, and when calls started failing
    /// since (0: never).
    pub answered_ms: u64,
    pub failed_ms: u64,
}

/// The heartbeat's window: the service's minute.
pub(crate) const BEAT_MS: u64 = 60_000;

/// What the heartbeat does at one sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Beat {
    /// Add this node's 1 to the count, and 1 to its own key beside it.
    pub add: bool,
    /// Read this node's own key (0 added): above 0, this run or an earlier
    /// one of the same node has added its 1 this minute.
    pub ask: bool,
}

impl Beat {
    /// The call carries the node's own key (to read, or to add to).
    pub(crate) fn own_key(self) -> bool {
        self.ask || self.add
    }
}

impl Record {
    const BYTES: usize = 8 * 8 + 4 * 2;

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(Self::BYTES);
        for n in [
            self.owner,
            self.until_ms,
            self.minute,
            self.beat,
            self.gen,
            self.asked,
            self.answered_ms,
            self.failed_ms,
        ] {
            v.extend_from_slice(&n.to_le_bytes());
        }
        v.extend_from_slice(&self.cur.to_le_bytes());
        v.extend_from_slice(&self.prev.to_le_bytes());
        v
    }

    pub fn decode(b: &[u8]) -> Option<Record> {
        if b.len() != Self::BYTES {
            return None;
        }
        let u64_at = |i: usize| read_u64(b, i);
        let u32_at = |i: usize| read_u32(b, i);
        Some(Record {
            owner: u64_at(0)?,
            until_ms: u64_at(8)?,
            minute: u64_at(16)?,
            beat: u64_at(24)?,
            gen: u64_at(32)?,
            asked: u64_at(40)?,
            answered_ms: u64_at(48)?,
            failed_ms: u64_at(56)?,
            cur: u32_at(64)?,
            prev: u32_at(68)?,
        })
    }

    /// `me`, of configuration generation `gen`, holds the lease at `now`
    /// or may take it (it ran out, or `gen` is newer than the holder's);
    /// the record with the lease renewed for `lease_ms`, or `None` when
    /// another holds it.
    pub fn claim(self, me: u64, gen: u64, now_ms: u64, lease_ms: u64) -> Option<Record> {
        let mine = self.owner == me && self.gen == gen;
        (mine || self.until_ms <= now_ms || gen > self.gen).then_some(Record {
            owner: me,
            gen,
            until_ms: now_ms.saturating_add(lease_ms),
            ..self
        })
    }

    /// Whether this node's 1 for the minute of `now` is still to be added.
    pub fn beat_due(&self, now_ms: u64) -> bool {
        self.beat != now_ms / BEAT_MS
    }

    /// The heartbeat of a sync at `now`: first read the node's own key,
    /// then (if it said 0) add the 1 to the count and to the own key.
    pub(crate) fn beat(&self, now_ms: u64) -> Beat {
        let minute = now_ms / BEAT_MS;
        let due = self.beat != minute;
        Beat {
            add: due && self.asked == minute,
            ask: due && self.asked != minute,
        }
    }

    /// This node's own key was read as `own` (its count this minute) by a
    /// call sent at `sent_ms`: above 0, its 1 is added already.
    pub fn asked(self, sent_ms: u64, own: u32) -> Record {
        let minute = sent_ms / BEAT_MS;
        let mut r = self;
        if own > 0 {
            r.beat = minute;
        } else {
            r.asked = minute;
        }
        r
    }

    /// A heartbeat call sent at `sent_ms` timed out: an add in it may have
    /// landed, so the own key is read again before any other add (the two
    /// 1s go in the same call, so the own key says whether the count's did).
    pub(crate) fn maybe_beat(self, sent_ms: u64, beat: Beat) -> Record {
        let mut r = self;
        if beat.add && r.asked == sent_ms / BEAT_MS {
            r.asked = 0;
        }
        r
    }

    /// The heartbeat was answered: `count` nodes have added theirs in the
    /// minute `sent_ms` was in (`added`: this node's was among them).
    pub(crate) fn heard(self, sent_ms: u64, count: u32, added: bool) -> Record {
        let minute = sent_ms / BEAT_MS;
        let mut r = self;
        if minute == r.minute.saturating_add(1) {
            r.prev = r.cur;
            r.cur = 0;
        } else if minute != r.minute {
            if minute < r.minute {
                return r;
            }
            // After a gap (an outage), the last count stands in for the
            // minute before until this one has heard every node.
            r.prev = r.cur.max(r.prev);
            r.cur = 0;
        }
        r.minute = minute;
        r.cur = r.cur.max(count);
        if added {
            r.beat = minute;
        }
        r
    }

    /// The nodes last counted (`None`: never heard). Early in a minute, the
    /// larger of this minute's count and the last one's; once the count is
    /// old (the service silent), the last known one, never the configured
    /// guess.
    pub fn nodes(&self, now_ms: u64) -> Option<u32> {
        let minute = now_ms / BEAT_MS;
        let n = if minute == self.minute.saturating_add(1) && self.cur > 0 {
            self.cur
        } else {
            self.cur.max(self.prev)
        };
        (n > 0).then_some(n)
    }

    /// A sync call was answered, or failed, at `now`.
    pub fn answered(self, now_ms: u64) -> Record {
        Record {
            answered_ms: now_ms,
            ..self
        }
    }

    pub fn failed(self, now_ms: u64) -> Record {
        Record {
            failed_ms: if self.failed_ms > self.answered_ms {
                self.failed_ms
            } else {
                now_ms.max(1)
            },
            ..self
        }
    }

    /// The service is down at `now`: calls have failed, none answered, for
    /// `stale_ms` (a node's first call failing as it connects is not an
    /// outage: its keys still wait for their first answer).
    pub fn down(&self, now_ms: u64, stale_ms: u64) -> bool {
        self.failed_ms > self.answered_ms && now_ms.saturating_sub(self.failed_ms) > stale_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Early in a minute whose count is not heard yet, the nodes are the
    /// last minute's count, even when that minute was heard only at its
    /// start (no node had added yet: 0), from the minute before it.
    #[test]
    fn a_minute_heard_at_0_leaves_the_count_before_it() {
        let m = 10 * BEAT_MS;
        let r = Record::default()
            .heard(m - 1_000, 3, true)
            .heard(m + 10, 0, false);
        assert_eq!(r.nodes(m + 20), Some(3));
        assert_eq!(r.nodes(m + BEAT_MS + 20), Some(3), "the next minute");
    }

    #[test]
    fn one_context_holds_the_lease_until_it_runs_out() {
        let r = Record::default().claim(1, 5, 1_000, 3_000).unwrap();
        assert_eq!(r.claim(2, 5, 3_999, 3_000), None);
        assert_eq!(r.claim(1, 5, 3_999, 3_000).unwrap().until_ms, 6_999);
        assert_eq!(r.claim(2, 5, 4_000, 3_000).unwrap().owner, 2);
        // A newer configuration takes it at once; the older cannot take it back.
        let newer = r.claim(3, 6, 1_001, 3_000).unwrap();
        assert_eq!((newer.owner, newer.gen), (3, 6));
        assert_eq!(newer.claim(1, 5, 1_002, 3_000), None);
        assert_eq!(Record::decode(&r.encode()), Some(r));
        assert_eq!(Record::decode(&r.encode()[1..]), None);
    }

    #[test]
    fn nodes_are_the_larger_of_this_minutes_count_and_the_last_ones() {
        let m = 10 * BEAT_MS;
        let r = Record::default();
        assert_eq!(r.nodes(m), None, "never heard");
        assert!(r.beat_due(m));
        let r = r.heard(m + 1_000, 3, true);
        assert!(!r.beat_due(m + 2_000));
        assert_eq!(r.nodes(m + 2_000), Some(3));
        // Next minute: only this node has added its 1 so far.
        let r = r.heard(m + BEAT_MS + 100, 1, true);
        assert_eq!(r.nodes(m + BEAT_MS + 200), Some(3));
        // A node gone: this minute's count is all the next minute knows.
        let r = r.heard(m + BEAT_MS + 30_000, 2, false);
        assert_eq!(r.nodes(m + 2 * BEAT_MS + 1), Some(2));
        // Old (the service silent): the larger of the last two counts (the
        // last may have been read early in its minute), never the guess.
        assert_eq!(r.nodes(m + 3 * BEAT_MS), Some(3));
        assert_eq!(r.nodes(m + 30 * BEAT_MS), Some(3));
        // An answer from before the record's minute changes nothing.
        assert_eq!(r.heard(m, 9, true), r);
    }

    #[test]
    fn the_service_is_down_once_calls_have_failed_for_a_while() {
        assert!(!Record::default().down(1_000_000, 800), "never called");
        let r = Record::default().failed(10_000);
        assert!(!r.down(10_500, 800), "a first call failing as it connects");
        assert!(!r.down(10_800, 800), "down after more than stale_ms");
        assert!(r.down(10_801, 800));
        let again = Record::default().answered(10_000).failed(10_000);
        assert!(!again.down(10_801, 800), "answered since it failed");
        let r = r.failed(10_600);
        assert_eq!(r.failed_ms, 10_000, "failing since the first");
        let r = r.answered(11_000);
        assert!(!r.down(20_000, 800));
        // A restarted node reads its own key; a timed-out add reads it
        // again before adding again.
        let m = 10 * BEAT_MS;
        let b = Record::default().beat(m);
        assert_eq!((b.ask, b.add), (true, false));
        let r = Record::default().asked(m, 1);
        assert!(!r.beat_due(m), "an earlier run added its 1");
        let r = Record::default().asked(m, 0);
        let add = Beat {
            add: true,
            ask: false,
        };
        assert_eq!(r.beat(m + 1), add);
        let r = r.maybe_beat(m + 1, add);
        assert_eq!(r.beat(m + 2), b, "read again, not added again");
        assert!(
            r.asked(m + 3, 1).beat(m + 4)
                == Beat {
                    add: false,
                    ask: false
                }
        );
        assert_eq!(r.asked(m + 3, 0).beat(m + 4), add, "lost: added again");
    }
}
