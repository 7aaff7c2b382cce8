//! The one web layer under the admin API and the console: the shared
//! state ([`AdminState`]), the route builder ([`Routes`]: a JSON route, a
//! page, a form), the scope guard ([`permitted`]), the store's work for a
//! request ([`on_store`]), the query parser ([`query`]), the event-stream
//! opener ([`stream`]), the refusal's two shapes ([`refusal`]:
//! `application/problem+json`, or the console's page) and the layers on
//! the whole listener ([`layers`], [`trace`]).
//!
//! Invariants: a route is added only through [`Routes`], with what it
//! needs of the credential, so none is without its guard; the guard
//! refuses before anything is read; a refusal's shape follows its path
//! (`/console…` a page, everything else problem+json), its status, code
//! and `Retry-After` from [`Code`]; the API and the console import this
//! module, never each other.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;

use crate::credential::{Authenticated, Caller, Scope};
use crate::error::{AdminError, Code, Surface};
use crate::model::Actor;
use janus_listen::answer::Refused;
use janus_store::{AsyncStore, Store};

pub(crate) mod layers;
pub(crate) mod query;
pub(crate) mod stream;
pub(crate) mod trace;

/// Requests whose state work runs at once, at most.
pub const MAX_WORK: usize = 16;
/// How long a request's work may take before it is answered 503 (the
/// state on a hung mount): its pool thread stays with it, its permit too.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(30);

/// What a route needs of the caller's credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// A valid credential, whatever its scopes (`whoami`).
    Credential,
    /// A credential with this scope.
    Scope(Scope),
}

/// What every handler of the admin listener shares.
#[derive(Clone)]
pub struct AdminState {
    /// The server's own store: one per process, its locks shared.
    pub(crate) store: AsyncStore,
    /// The state directory, for the event streams' follower.
    pub(crate) state: Arc<PathBuf>,
    pub(crate) streams: Arc<stream::StreamSlots>,
    pub(crate) work: Arc<tokio::sync::Semaphore>,
    pub(crate) deadline: Duration,
    /// Set when the server stops: open event streams end.
    pub(crate) closing: tokio::sync::watch::Receiver<bool>,
}

impl AdminState {
    /// The state of a listener on `store` (whose directory is `state`).
    pub fn new(store: AsyncStore, state: PathBuf, closing: tokio::sync::watch::Receiver<bool>) -> Self {
        AdminState {
            store,
            state: Arc::new(state),
            streams: Arc::default(),
            work: Arc::new(tokio::sync::Semaphore::new(MAX_WORK)),
            deadline: REQUEST_DEADLINE,
            closing,
        }
    }
}

/// Routes under construction, with the table of what each needs.
pub(crate) struct Routes {
    pub(crate) router: Router<AdminState>,
    pub(crate) table: Vec<(Method, &'static str, Needs)>,
}

impl Routes {
    pub(crate) fn new() -> Self {
        Routes { router: Router::new(), table: Vec::new() }
    }

    /// `handler` at `method` `path`, behind the guard of `needs`.
    pub(crate) fn route(
        mut self,
        method: Method,
        path: &'static str,
        needs: Needs,
        handler: MethodRouter<AdminState>,
    ) -> Self {
        // An API route that takes a body takes JSON: checked after the
        // guard, before the handler.
        let handler = if method == Method::POST && surface_of(path) == Surface::Api {
            handler.route_layer(axum::middleware::from_fn(layers::json_declared))
        } else {
            handler
        };
        self.table.push((method, path, needs));
        let guarded =
            handler.route_layer(axum::middleware::from_fn(move |r: Request, n: Next| guard(needs, r, n)));
        self.router = self.router.route(path, guarded);
        self
    }
}

/// The guard: the caller, when its credential has what the route needs,
/// goes to the handler in the request's extensions (as [`Caller`]);
/// refused in the path's shape otherwise.
async fn guard(needs: Needs, mut request: Request, next: Next) -> Response {
    match permitted(needs, &request) {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(refused) => refusal(request.uri().path(), refused),
    }
}

/// The caller, when its credential has what `needs` says; why not otherwise.
pub(crate) fn permitted<B>(needs: Needs, request: &axum::http::Request<B>) -> Result<Caller, AdminError> {
    let caller = match request.extensions().get::<Authenticated>().map(|a| a.as_ref()) {
        Some(Ok(caller)) => caller.clone(),
        Some(Err(why)) => return Err(AdminError::new(Code::CredentialInvalid, why.to_string())),
        None => return Err(AdminError::new(Code::CredentialInvalid, "no client certificate")),
    };
    if let Needs::Scope(scope) = needs
        && !caller.may(scope)
    {
        return Err(AdminError::new(
            Code::ScopeMissing,
            format!(
                "the credential {:?} may not {}: it lacks the scope {:?}",
                caller.name,
                what(scope),
                scope.name()
            ),
        ));
    }
    Ok(caller)
}

fn what(scope: Scope) -> &'static str {
    match scope {
        Scope::Tokens => "make or revoke tokens",
        Scope::Read => "read nodes or events",
        Scope::Approve => "approve nodes",
        Scope::Reject => "reject nodes",
    }
}

/// The surface a path belongs to: the console's pages, or the API.
pub(crate) fn surface_of(path: &str) -> Surface {
    if path == "/console" || path.starts_with("/console/") { Surface::Console } else { Surface::Api }
}

/// A refusal in the shape its path's reader reads.
pub(crate) fn refusal(path: &str, error: AdminError) -> Response {
    match surface_of(path) {
        Surface::Console => page_refusal(error),
        _ => problem(error),
    }
}

/// The RFC 9457 document of a refusal, as the API answers it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Problem {
    /// `urn:janus-registration:error:<code>`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The code's title, the same for every refusal of it.
    pub title: String,
    /// The HTTP status.
    pub status: u16,
    /// What went wrong with this request, and the way out.
    pub detail: String,
    /// What a program acts on (docs/orchestrating.md's code table).
    pub code: Code,
    /// The request's field it concerns, as the API names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The detail again, for clients of the `{"error": …}` answers before codes.
    pub error: String,
}

impl Problem {
    /// `error` as the API says it.
    pub fn of(error: &AdminError) -> Problem {
        let detail = janus_core::terminal::escape(&error.said(Surface::Api)).into_owned();
        Problem {
            kind: format!("urn:janus-registration:error:{}", error.code),
            title: error.code.title().to_string(),
            status: error.code.status(),
            detail: detail.clone(),
            code: error.code,
            field: error.field.map(|f| f.name(Surface::Api).to_string()),
            error: detail,
        }
    }
}

/// The API's refusal: problem+json, `Retry-After` where a retry helps,
/// and the line the trace layer logs.
pub(crate) fn problem(error: AdminError) -> Response {
    let problem = Problem::of(&error);
    let status = StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = serde_json::to_vec(&problem).unwrap_or_default();
    let mut response = (status, body).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
    marked(&mut response, &error, problem.detail);
    response
}

/// The console's refusal: a page with the same status, words and `Retry-After`.
pub(crate) fn page_refusal(error: AdminError) -> Response {
    let said = janus_core::terminal::escape(&error.said(Surface::Console)).into_owned();
    let title = match error.code.status() {
        403 => "Refused",
        404 => "Not found",
        503 => "Not now",
        500 => "Failed",
        _ => "Not done",
    };
    let status = StatusCode::from_u16(error.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response =
        (status, axum::response::Html(failure_page(title, &said, error.code).into_string())).into_response();
    marked(&mut response, &error, said);
    response
}

/// `Retry-After` and the trace layer's line on a refusal's answer.
fn marked(response: &mut Response, error: &AdminError, said: String) {
    if let Some(secs) = error.code.retry_after() {
        response.headers_mut().insert(header::RETRY_AFTER, secs.into());
    }
    let cause = error.cause().map(|c| (c.to_string(), None));
    response.extensions_mut().insert(Refused {
        level: error.code.log_level(),
        said: format!("{}: {said}", error.code),
        cause,
    });
}

/// A refusal's page, in the console's frame (its stylesheet, no script).
pub(crate) fn failure_page(title: &str, said: &str, code: Code) -> maud::Markup {
    maud::html! {
        (maud::DOCTYPE)
        html lang="en" {
            head { meta charset="utf-8"; title { (title) " · janus-registration" }
                link rel="stylesheet" href="/console/assets/console.css"; }
            body { main { h1 { (title) } p .said.refused role="alert" data-code=(code) { (said) }
                p { a href="/console/" { "Back to the console" } } } }
        }
    }
}

/// Runs `work` on the server's store, on the blocking pool, for `actor`;
/// 503 when [`MAX_WORK`] requests' work is running and none finishes
/// within the deadline, or this one does not.
pub(crate) async fn on_store<T: Send + 'static>(
    state: &AdminState,
    actor: Actor,
    work: impl FnOnce(&Store, &Actor) -> Result<T, AdminError> + Send + 'static,
) -> Result<T, AdminError> {
    let deadline = state.deadline;
    let (store, slots) = (state.store.clone(), state.work.clone());
    let run = async move {
        let permit = slots.acquire_owned().await.map_err(|e| AdminError::internal(e.to_string()))?;
        let done = store
            .run(move |store| {
                let _permit = permit; // held while the work runs, however long
                work(store, &actor)
            })
            .await;
        match done {
            Ok(done) => done,
            // A panic's words are ours: logged, never sent.
            Err(failed) => Err(AdminError::internal(format!("the request's task failed: {failed}"))),
        }
    };
    tokio::time::timeout(deadline, run).await.unwrap_or_else(|_| {
        Err(AdminError::new(
            Code::DeadlineExceeded,
            format!(
                "the state did not answer within {} s (a hung mount?); what was asked may still be done: \
                 look before you retry",
                deadline.as_secs()
            ),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Work on a hung mount: the request is answered 503 at its deadline,
    /// and its permit is held until the work returns. (Real time, a short
    /// deadline: blocking work keeps a paused clock from advancing.)
    #[tokio::test]
    async fn work_past_its_deadline_is_answered_503_and_keeps_its_permit() {
        let dir = tempfile::tempdir().unwrap();
        let store = AsyncStore::new(Store::open(dir.path()).unwrap());
        let (_closing, closed) = tokio::sync::watch::channel(false);
        let mut state = AdminState::new(store, dir.path().to_path_buf(), closed);
        state.deadline = Duration::from_millis(100);
        let (release, hung) = std::sync::mpsc::channel::<()>();
        let answer = on_store(&state, Actor::new(Surface::Api, "orchestrator"), move |_, _| {
            let _ = hung.recv(); // a read that does not return
            Ok(())
        })
        .await;
        let refused = answer.unwrap_err();
        assert_eq!(refused.code, Code::DeadlineExceeded);
        assert!(refused.said(Surface::Api).contains("did not answer within"));
        assert_eq!(state.work.available_permits(), MAX_WORK - 1, "the hung work keeps its permit");
        release.send(()).unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while state.work.available_permits() < MAX_WORK {
            assert!(tokio::time::Instant::now() < deadline, "the permit came back when the work returned");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[test]
    fn a_problem_says_its_code_status_and_field_in_the_apis_words() {
        let refused = AdminError::field(crate::Field::Count, "must be between 1 and 100000");
        let problem = Problem::of(&refused);
        assert_eq!(
            (problem.status, problem.code, problem.field.as_deref()),
            (400, Code::InvalidField, Some("count"))
        );
        assert_eq!(problem.detail, "count must be between 1 and 100000");
        let response = super::problem(AdminError::new(Code::LockTimeout, "locked"));
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/problem+json");
        assert_eq!(response.headers()[header::RETRY_AFTER], "5");
    }
}
