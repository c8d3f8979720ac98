mod inventory;
mod report;
mod stats;

fn main() {
    let inv = inventory::sample(200);
    let s = stats::summarize(&inv);
    println!("{}", report::render(&inv, &s));
}
