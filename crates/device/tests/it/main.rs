mod crash;
mod faulty;
mod file;
mod mem;
mod recording;
mod signature;
