mod crash;
mod faulty;
mod file;
mod front;
mod mem;
mod recording;
mod signature;
