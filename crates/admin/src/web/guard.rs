//! The route builder ([`Routes`]) and the scope guard ([`permitted`]):
//! the only way a route joins the admin listener.
//!
//! Invariants: a route is added only through [`Routes::route`], with what
//! it needs of the credential, so none is without its guard; the guard
//! refuses before anything is read; an API `POST` route takes JSON only.

use axum::Router;
use axum::extract::Request;
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::MethodRouter;

use super::layers;
use super::refusal::{refusal, surface_of};
use super::state::AdminState;
use crate::credential::{Authenticated, Caller, Scope};
use crate::error::{AdminError, Code, Surface};

/// What a route needs of the caller's credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// A valid credential, whatever its scopes (`whoami`).
    Credential,
    /// A credential with this scope.
    Scope(Scope),
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
