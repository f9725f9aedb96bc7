//! The checkout service the servers run: the example's own code (`checkout_server`'s
//! `app.rs`: the layer on the route, the handler that charges the gateway and, on a
//! recovery, looks the key up first), compiled in from where it lives, not a copy.

#[allow(dead_code, clippy::all)]
#[path = "../../idem-http/examples/checkout_server/app.rs"]
pub(crate) mod app;
#[allow(dead_code, clippy::all)]
#[path = "../../idem-http/examples/checkout_server/remote.rs"]
pub(crate) mod remote;
