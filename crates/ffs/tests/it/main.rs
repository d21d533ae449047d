mod common;
mod files;
mod fsck;
mod model;
