//! What a request asks of its rule, and what it gets: the request with its options (the
//! contract's "Beyond yes or no"), the outcome with the reply's fields, and the events
//! `INFO ratelimit` counts. Shared by every algorithm; pure, no Redis types.

use super::token::Token;
use super::Decision;

/// What a command appends after the five standard fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extra {
    None,
    /// `RL.QUEUE`: ms the admitted request waits (0 when refused; for a peek or a refund,
    /// what a request admitted now would wait).
    Delay(u64),
    /// `RL.ACQUIRE`: the lease's token (None when refused).
    Token(Option<Token>),
}

/// What a request asks of its rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// Spend this many units (`COST n`, default 1); 0 is a peek.
    Spend(u64),
    /// Give back this many units (`REFUND n`).
    Refund(u64),
}

/// One request: what it asks and its options (the contract's "Beyond yes or no").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub ask: Ask,
    /// `PARTIAL`: spend up to the cost, at least one unit.
    pub partial: bool,
    /// `RESERVE r`: admit only if at least `r` units remain after this request.
    pub reserve: u64,
    /// `BLOCK ms`: when refused, refuse every request for this long (0: no BLOCK).
    pub block_ms: u64,
    /// `PROBE`: may be the probe of a key paused with `RL.PAUSE ... PROBE` (the reply gains
    /// the field `probe`).
    pub probe: bool,
    /// Not a dry run: an admitted request, a refund and a refusal that starts or extends a
    /// block store what they change.
    pub commit: bool,
}

impl Request {
    /// A request of at least one unit with none of the options beyond COST and DRYRUN.
    #[inline]
    pub fn is_plain(&self) -> bool {
        matches!(self.ask, Ask::Spend(c) if c > 0)
            && !self.partial
            && self.reserve == 0
            && self.block_ms == 0
            && !self.probe
    }

    /// The units a spend asks for (0 for a refund).
    #[inline]
    pub fn cost(&self) -> u64 {
        match self.ask {
            Ask::Spend(c) => c,
            Ask::Refund(_) => 0,
        }
    }

    /// A plain request of `cost` units.
    pub const fn spend(cost: u64, commit: bool) -> Request {
        Request {
            ask: Ask::Spend(cost),
            partial: false,
            reserve: 0,
            block_ms: 0,
            probe: false,
            commit,
        }
    }
}

/// An event of a request that `INFO ratelimit` counts: bit `1 << event` of
/// [`Outcome::events`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A cost-0 request.
    Peek,
    /// A refund.
    Refund,
    /// A PARTIAL request granted fewer units than it asked for.
    PartialShort,
    /// Refused because the RESERVE would not have remained.
    ReserveRefused,
    /// A refusal that started or extended a block.
    BlockSet,
    /// Refused because the key is blocked.
    Blocked,
}

impl Event {
    /// Every event, in bit order, with its `INFO ratelimit` counter.
    pub const ALL: [(Event, &'static str); 6] = [
        (Event::Peek, "peeks"),
        (Event::Refund, "refunds"),
        (Event::PartialShort, "partial_short_grants"),
        (Event::ReserveRefused, "reserve_refusals"),
        (Event::BlockSet, "blocks_set"),
        (Event::Blocked, "blocked_refusals"),
    ];

    /// The event's bit in [`Outcome::events`].
    pub const fn bit(self) -> u8 {
        1 << self as u8
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub decision: Decision,
    pub extra: Extra,
    /// `PARTIAL`: the units spent (0 when refused).
    pub granted: Option<u64>,
    /// `PROBE`: whether this request was admitted as the probe of a paused key.
    pub probe: Option<bool>,
    /// The state was changed and must be stored, expired and replicated.
    pub wrote: bool,
    /// What happened, for the counters ([`Event`] bits).
    pub events: u8,
    /// `WAIT`: the ms the client waited (the reply's last field); set by the command layer.
    pub waited: Option<u64>,
}
