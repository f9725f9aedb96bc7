//! The check, from outside the servers: the gateway's log of charges and the clients'
//! answers. Every intent charged exactly once, every answer of an intent naming that
//! charge, the amounts adding up; and, once the faults stop and every intent has been
//! retried to its answer, no claim left in flight and one order per charge in the
//! database.

use std::collections::HashMap;
use std::path::Path;

use super::load::{Intent, Seen};

/// What went wrong, intent by intent.
#[derive(Debug, Default)]
pub(crate) struct Verdict {
    pub(crate) doubles: Vec<String>,
    pub(crate) lost: Vec<String>,
    pub(crate) mismatched: Vec<String>,
    pub(crate) other: Vec<String>,
    /// The one charge of each intent charged once, by the intent's key: its id and amount.
    pub(crate) charged: HashMap<String, (String, u64)>,
}

impl Verdict {
    pub(crate) fn passed(&self) -> bool {
        self.doubles.is_empty()
            && self.lost.is_empty()
            && self.mismatched.is_empty()
            && self.other.is_empty()
    }
}

/// One line of the gateway's log: `KEY AMOUNT_MINOR CURRENCY ID CUSTOMER`.
struct Charged {
    amount_minor: u64,
    id: String,
}

/// The gateway's charges by customer (one customer per intent).
fn charges(log: &Path) -> Result<HashMap<String, Vec<Charged>>, String> {
    let text = std::fs::read_to_string(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let mut by_customer: HashMap<String, Vec<Charged>> = HashMap::new();
    for line in text.lines() {
        let parts: Vec<&str> = line.splitn(5, ' ').collect();
        let [_, amount, _, id, customer] = parts[..] else { continue };
        let Ok(amount_minor) = amount.parse() else { continue };
        let charge = Charged { amount_minor, id: format!("ch_{id}") };
        by_customer.entry(customer.to_string()).or_default().push(charge);
    }
    Ok(by_customer)
}

/// Judges the run: the log at `log` against `intents` and what the clients `seen`.
pub(crate) fn judge(log: &Path, intents: &[Intent], seen: &Seen) -> Result<Verdict, String> {
    let mut by_customer = charges(log)?;
    let mut verdict = Verdict { other: seen.refused.clone(), ..Verdict::default() };
    for (index, intent) in intents.iter().enumerate() {
        let made = by_customer.remove(&intent.customer).unwrap_or_default();
        let name = format!("intent {index} (key {})", intent.key);
        match &made[..] {
            [] => verdict.lost.push(format!("{name}: never charged")),
            [one] => {
                verdict.charged.insert(intent.key.clone(), (one.id.clone(), one.amount_minor));
                if one.amount_minor != intent.amount_minor {
                    verdict.other.push(format!("{name}: charged {}", one.amount_minor));
                }
                if let Some(wrong) = seen.charges[index].iter().find(|id| **id != one.id) {
                    verdict
                        .mismatched
                        .push(format!("{name}: answered {wrong}, charged {}", one.id));
                }
            }
            many => {
                let ids: Vec<&str> = many.iter().map(|c| c.id.as_str()).collect();
                verdict.doubles.push(format!("{name}: charged {} times ({ids:?})", many.len()));
            }
        }
        if seen.charges[index].is_empty() && !made.is_empty() {
            verdict.lost.push(format!("{name}: charged, never answered"));
        }
    }
    for customer in by_customer.keys() {
        verdict.other.push(format!("a charge for no intent: customer {customer}"));
    }
    Ok(verdict)
}

/// Runs `sql` with psql against `url`; its one value.
pub(crate) fn psql(url: &str, sql: &str) -> Result<String, String> {
    let out = std::process::Command::new("psql")
        .args([url, "-tAc", sql])
        .output()
        .map_err(|e| format!("psql: {e}"))?;
    if !out.status.success() {
        return Err(format!("psql {sql:?}: {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// What the database holds once the run is over: the claims still in flight, and the
/// orders (count and amount), which must be one per charge.
pub(crate) fn database(url: &str, verdict: &mut Verdict, intents: usize) -> Result<(), String> {
    let in_flight = psql(url, "SELECT count(*) FROM checkout.claims WHERE NOT finished")?;
    if in_flight != "0" {
        verdict.other.push(format!("{in_flight} claims left in flight after the reconcile"));
    }
    // Row by row: each order names its intent's one charge and amount, and every charged
    // intent has its order.
    let rows =
        psql(url, "SELECT key || ' ' || charge || ' ' || amount_minor FROM checkout.orders")?;
    let mut ordered = 0;
    for row in rows.lines() {
        ordered += 1;
        let parts: Vec<&str> = row.split(' ').collect();
        let [scoped, charge, amount] = parts[..] else {
            verdict.other.push(format!("an order row {row:?}"));
            continue;
        };
        let key = scoped.rsplit_once(':').map_or(scoped, |(_, key)| key);
        let charged = verdict.charged.get(key).map(|(id, minor)| (id.as_str(), minor.to_string()));
        if charged != Some((charge, amount.to_string())) {
            verdict.other.push(format!("order {row:?}, but the log charged {charged:?}"));
        }
    }
    if ordered != intents {
        verdict.other.push(format!("{ordered} orders for {intents} intents"));
    }
    Ok(())
}
