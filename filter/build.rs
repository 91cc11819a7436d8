// Stamps the git commit so the module can say what it is.
include!("../build-support/git_commit.rs");

fn main() {
    git_commit();
}
