mod log;
