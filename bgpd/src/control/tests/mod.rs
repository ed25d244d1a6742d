//! Server tests over real sockets, with a fake daemon.
mod api;
mod health;
mod metrics;
mod support;
mod view;
