mod damage;
mod log;
mod stripe;
