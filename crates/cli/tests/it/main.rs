mod cli;
mod run;
