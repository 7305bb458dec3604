//! TCP stack sysctls and routes: busy polling (`net.core.busy_poll`/`busy_read`, step 6), the
//! congestion control (step 9) and the initial congestion/receive windows on routes
//! (`ip route show`, beyond the nine steps).

use super::host::Host;
use super::sources;
use super::{Finding, Meta, Severity, Status, Step};

const BUSY_POLL: Meta = Meta {
    id: "busy-poll",
    step: Step::Interrupts,
    title: "busy polling",
    severity: Severity::High,
    why: "epoll busy-polls the NIC queue instead of sleeping until an interrupt; with fixed interrupt moderation the story measured about +28%",
    fix: "sysctl -w net.core.busy_poll=50 net.core.busy_read=50",
};

const CONGESTION: Meta = Meta {
    id: "congestion-control",
    step: Step::DiminishingReturns,
    title: "TCP congestion control",
    severity: Severity::Low,
    why: "on a LAN with small responses reno does the least work per ACK; the story measured about +2-4% for reno together with GRO off (keep cubic/bbr for internet clients)",
    fix: "sysctl -w net.ipv4.tcp_congestion_control=reno",
};

const INITCWND: Meta = Meta {
    id: "initcwnd",
    step: Step::Beyond,
    title: "initial congestion/receive window on routes",
    severity: Severity::Info,
    why: "a response larger than initcwnd segments (10 × MSS, about 14 KB, by default) needs another round trip on a fresh connection",
    fix: "ip route change default via GW dev IF initcwnd 32 initrwnd 32",
};

/// The kernel's initial congestion window when a route sets none (RFC 6928).
const DEFAULT_INITCWND: u64 = 10;
/// The congestion control the story ended with.
const STORY_CONGESTION: &str = "reno";
/// Routes described in `observed` before the rest is counted only.
const MAX_ROUTES_SHOWN: usize = 4;

/// Step 6: `net.core.busy_poll` (epoll/poll) and `net.core.busy_read` (blocking reads), in µs.
pub fn check_busy_poll(h: &dyn Host) -> Vec<Finding> {
    let poll = sources::sysctl_number(h, "net.core.busy_poll");
    let read = sources::sysctl_number(h, "net.core.busy_read");
    let show = |v: Option<u64>| v.map_or_else(|| "?".to_owned(), |v| format!("{v} µs"));
    let observed = format!("busy_poll {}, busy_read {}", show(poll), show(read));
    let status = match (poll, read) {
        (None, None) => Status::Unknown,
        // linerate waits in epoll, which only busy_poll affects.
        (Some(p), _) if p > 0 => Status::Ok,
        (_, Some(r)) if r > 0 => Status::Warn,
        _ => Status::Bad,
    };
    vec![BUSY_POLL.finding(status, observed)]
}

/// Step 9: the default TCP congestion control.
pub fn check_congestion_control(h: &dyn Host) -> Vec<Finding> {
    let finding = match sources::sysctl(h, "net.ipv4.tcp_congestion_control") {
        None => CONGESTION.finding(
            Status::Unknown,
            "net.ipv4.tcp_congestion_control unreadable",
        ),
        Some(cc) => {
            let available = sources::sysctl(h, "net.ipv4.tcp_available_congestion_control")
                .map_or_else(String::new, |a| format!(" (available: {a})"));
            let status = if cc == STORY_CONGESTION {
                Status::Ok
            } else {
                Status::Warn
            };
            CONGESTION.finding(status, format!("{cc}{available}"))
        }
    };
    vec![finding]
}

/// The number after `key` in a route's tokens.
fn route_value(tokens: &[&str], key: &str) -> Option<u64> {
    let at = tokens.iter().position(|t| *t == key)?;
    tokens.get(at + 1)?.parse().ok()
}

/// Beyond the steps: `initcwnd`/`initrwnd` on each IPv4 route (absent: the kernel default).
pub fn check_initcwnd(h: &dyn Host) -> Vec<Finding> {
    let Some(routes) = h.command(&["ip", "route", "show"]) else {
        return vec![INITCWND.finding(
            Status::Unknown,
            "`ip route show` unavailable (iproute2 missing)",
        )];
    };
    let mut seen = Vec::new();
    let mut lowered = false;
    let mut default_route = None;
    let lines: Vec<&str> = routes.lines().filter(|l| !l.trim().is_empty()).collect();
    for line in &lines {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let cwnd = route_value(&tokens, "initcwnd");
        let rwnd = route_value(&tokens, "initrwnd");
        lowered |= cwnd.is_some_and(|c| c < DEFAULT_INITCWND);
        if tokens.first() == Some(&"default") && default_route.is_none() {
            default_route = Some(route_without_windows(&tokens));
        }
        let show = |v: Option<u64>| {
            v.map_or_else(
                || format!("{DEFAULT_INITCWND} (default)"),
                |v| v.to_string(),
            )
        };
        if seen.len() < MAX_ROUTES_SHOWN {
            let dest = tokens[..tokens.len().min(5)].join(" ");
            seen.push(format!(
                "{dest}: initcwnd {}, initrwnd {}",
                show(cwnd),
                show(rwnd)
            ));
        }
    }
    if lines.len() > MAX_ROUTES_SHOWN {
        seen.push(format!("… {} more routes", lines.len() - MAX_ROUTES_SHOWN));
    }
    if lines.is_empty() {
        seen.push("no IPv4 routes".to_owned());
    }
    let fix = default_route.map_or_else(
        || INITCWND.fix.to_owned(),
        |r| format!("ip route change {r} initcwnd 32 initrwnd 32"),
    );
    let status = if lowered { Status::Warn } else { Status::Ok };
    vec![INITCWND.finding_fix(status, seen.join("; "), fix)]
}

/// A route line without its `initcwnd N`/`initrwnd N` pairs, ready for `ip route change`.
fn route_without_windows(tokens: &[&str]) -> String {
    let mut out = Vec::new();
    let mut skip_next = false;
    for t in tokens {
        if skip_next {
            skip_next = false;
        } else if *t == "initcwnd" || *t == "initrwnd" {
            skip_next = true;
        } else {
            out.push(*t);
        }
    }
    out.join(" ")
}
