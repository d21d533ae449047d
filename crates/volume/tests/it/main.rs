mod common;
mod config;
mod metadata;
mod mirror;
mod props;
mod raid5;
mod revive;
mod striped;
