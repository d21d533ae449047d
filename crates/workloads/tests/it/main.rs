mod bonnie;
mod crash;
mod engine;
mod gen;
mod journal_crash;
mod layout;
mod spec;
mod validate;
