mod common;
mod files;
mod model;
