//! Routing as a user meets it through the public API: the most specific pattern answers
//! whatever the registration order, and a router with a method and pattern registered twice
//! is refused when a server (or a test client) is built from it, with an error, not a panic.

use linerate_server::testing::{TestClient, TestServer};
use linerate_server::{Part, Response, Router};

/// Regression: with `/todos/{id}` registered first, `/todos/events` answered 400
/// "invalid path parameter id".
#[test]
fn a_literal_segment_beats_a_parameter_registered_before_it() {
    let router = Router::new()
        .get("/todos/{id}", |req| {
            req.param_as::<u64>("id")
                .map(|id| Response::text_owned(format!("todo {id}")))
        })
        .get("/todos/events", |_| "events");
    let c = TestClient::new(router);
    let events = c.get("/todos/events").send();
    assert_eq!((events.status(), events.text()), (200, "events".into()));
    let todo = c.get("/todos/7").send();
    assert_eq!((todo.status(), todo.text()), (200, "todo 7".into()));
}

#[test]
fn a_route_registered_twice_is_refused_at_bind() {
    let twice = || {
        let users = Router::new().get("/users/{name}", |_| "b");
        Router::new().get("/users/{id}", |_| "a").merge(users)
    };
    let e = TestServer::start(twice()).expect_err("a duplicate route is refused");
    assert_eq!(e.part, Part::Routes);
    assert_eq!(
        e.to_string(),
        "route GET /users/{id} is registered twice (again as /users/{name})"
    );
    let e = TestClient::with_config(Default::default(), twice()).expect_err("refused");
    assert_eq!(e.part, Part::Routes);
}
