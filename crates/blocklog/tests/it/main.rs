mod log;
mod stripe;
