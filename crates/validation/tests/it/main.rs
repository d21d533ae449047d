mod check;
mod stamp;
