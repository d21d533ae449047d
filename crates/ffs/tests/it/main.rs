mod common;
mod model;
