//! A bound's cost, compiled: where a request's units are read, what is
//! reserved at admission, and what tokens cost by model.

pub use crate::config::CostSource;
use crate::config::{CheckedCost, CostConfig, PriceConfig};

/// A price table: millionths of the unit a token in and a token out, by
/// model (integers, so a charge is exact and the cost hashable).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Prices {
    pub models: Vec<(String, (u64, u64))>,
    /// Any other model's (`"*"`, or the table's highest).
    pub other: (u64, u64),
}

/// One unit, in millionths.
const WHOLE: u64 = 1_000_000;

fn millionths(p: &PriceConfig) -> (u64, u64) {
    let m = |x: f64| (x.clamp(0.0, 1e6) * WHOLE as f64).round() as u64;
    (m(p.input), m(p.output))
}

/// A bound's cost, compiled.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cost {
    pub source: CostSource,
    /// Units taken at admission for a cost the response gives (and the
    /// charge of a request whose cost never comes): `reserve`, or the
    /// floor of what the request allows itself (`from_request`).
    pub reserve: u32,
    /// A `response_json` cost without `reserve`: the reservation is what
    /// the request allows itself, at most this ceiling.
    pub from_request: Option<u32>,
    /// A stream that does not ask for its usage is made to
    /// (`stream_options.include_usage`).
    pub ask_usage: bool,
    /// The largest request body read before admission.
    pub max_request_bytes: usize,
    /// Prices by the request's model (`ResponseParts` only).
    pub prices: Option<Prices>,
    pub unit: String,
}

/// A request body read before admission, by default: 4 MiB (a prompt of a
/// million tokens).
pub(crate) const MAX_REQUEST_BYTES: usize = 4 << 20;

impl Cost {
    /// `c` compiled, for a bound of `limit`, from what its checks found.
    pub fn compile(c: &CostConfig, checked: &CheckedCost, limit: u32) -> Cost {
        let source = checked.source.clone();
        let json = source.in_body();
        let prices = c.prices.as_ref().map(|table| {
            let models: Vec<(String, (u64, u64))> = table
                .iter()
                .filter(|(m, _)| m.as_str() != "*")
                .map(|(m, p)| (m.clone(), millionths(p)))
                .collect();
            let highest = models
                .iter()
                .fold((0, 0), |(i, o), (_, (pi, po))| (i.max(*pi), o.max(*po)));
            Prices {
                other: table.get("*").map_or(highest, millionths),
                models,
            }
        });
        let from_request = (json && checked.reserve.is_none())
            .then(|| checked.reserve_ceiling.unwrap_or(limit).min(limit));
        Cost {
            source,
            reserve: checked.reserve.or(checked.reserve_floor).unwrap_or(1),
            from_request,
            ask_usage: json && c.ask_usage.unwrap_or(true),
            max_request_bytes: c.max_request_bytes.unwrap_or(MAX_REQUEST_BYTES),
            prices,
            unit: c.unit.clone().unwrap_or_else(|| "units".to_string()),
        }
    }

    /// Known only once the response comes: taken as `reserve` at
    /// admission, trued up then.
    pub fn from_response(&self) -> bool {
        !matches!(self.source, CostSource::RequestHeader(_))
    }

    /// The request body is read before admission: for the reservation it
    /// allows itself, or to ask for its usage.
    pub(crate) fn reads_request(&self) -> bool {
        self.from_request.is_some() || self.ask_usage
    }

    /// What a request for `model` that allows itself `ceiling` output
    /// tokens and sends a prompt of `prompt` tokens takes at admission.
    pub fn reservation(&self, ceiling: Option<u32>, prompt: u32, model: Option<&str>) -> u32 {
        match self.from_request {
            Some(most) => self
                .units(prompt, ceiling.unwrap_or(0), model)
                .clamp(self.reserve.min(most), most),
            None => self.reserve.max(self.units(prompt, 0, model)),
        }
    }

    /// What `input` tokens in and `output` tokens out cost, for `model`:
    /// their sum, or their price (rounded up) when the cost has prices.
    pub fn units(&self, input: u32, output: u32, model: Option<&str>) -> u32 {
        let Some(prices) = &self.prices else {
            return input.saturating_add(output);
        };
        let (pi, po) = model
            .and_then(|m| prices.models.iter().find(|(name, _)| name == m))
            .map_or(prices.other, |(_, p)| *p);
        let total = u128::from(input) * u128::from(pi) + u128::from(output) * u128::from(po);
        u32::try_from(total.div_ceil(u128::from(WHOLE))).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    /// The compiled cost of a bound of a limit of 1,000,000 given `cost`.
    fn compiled(cost: &str) -> super::Cost {
        let json = format!(
            r#"{{"routes":[{{"name":"a","bounds":[
            {{"per":"address","limit":1000000,"window":"PT1M","cost":{cost}}}]}}]}}"#
        );
        let config = crate::config::parse(json.as_bytes()).unwrap();
        crate::config::plan::Plan::compile(&config)
            .routes
            .first()
            .and_then(|r| r.bounds.first())
            .and_then(|b| b.cost.clone())
            .unwrap()
    }

    #[test]
    fn a_price_table_weighs_tokens_in_and_out_by_model() {
        let cost = compiled(
            r#"{"input_json":"/i","output_json":"/o","prices":{
                "a":{"input":0.5,"output":2},"b":{"input":3,"output":1},"*":{"input":1,"output":1}}}"#,
        );
        assert_eq!(cost.units(10, 10, Some("a")), 25);
        assert_eq!(cost.units(10, 10, Some("b")), 40);
        assert_eq!(cost.units(10, 10, Some("zzz")), 20);
        // Rounded up, never down.
        assert_eq!(cost.units(1, 0, Some("a")), 1);
        // Without "*": the highest price in and the highest out.
        let cost = compiled(
            r#"{"input_json":"/i","output_json":"/o","prices":{
                "a":{"input":0.5,"output":2},"b":{"input":3,"output":1}}}"#,
        );
        assert_eq!(cost.units(10, 10, None), 50);
        // Unpriced parts are summed.
        let cost = compiled(r#"{"input_json":"/i","output_json":"/o"}"#);
        assert_eq!(cost.units(7, 5, Some("a")), 12);
    }
}
