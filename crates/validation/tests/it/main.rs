mod check;
mod journal;
mod stamp;
