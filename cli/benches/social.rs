//! Benchmark of the social model (written with the model).

fn main() {
    println!("no figures yet");
}
