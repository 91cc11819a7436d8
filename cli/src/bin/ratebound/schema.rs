//! `ratebound schema`: the configuration's JSON Schema.

use crate::output::{out, VALID};
use ratebound::reading::schema;

pub fn run() -> u8 {
    out(&schema::text());
    VALID
}
