# Homebrew formula: builds Splash from source on an Apple silicon Mac and installs the single executable.
#
#   brew install --HEAD ./packaging/homebrew/splash.rb      from a checkout of the repository
#
# The build needs Node (npm fetches the pinned Bun and the other devDependencies from package-lock.json) and a C
# compiler with the macOS SDK, which Homebrew always has (Xcode Command Line Tools): libsplash is C11 plus one
# Objective-C file linked with the Metal, Foundation and CoreGraphics frameworks. The Metal kernels are committed
# MSL (kernels/msl/) compiled by Metal at run time, so neither Xcode nor any shader tool is needed. `bun build
# --compile` then makes dist/splash: the TypeScript, libsplash and the embedded default model in one file.
#
# The library runs on macOS 15 and later (the Metal calls it makes); `splash doctor` checks the machine against
# the published minimum for Splash itself: M3 or newer, macOS 26.4+, 36 GB of unified memory (48 GB recommended).
class Splash < Formula
  desc "Local LLM inference engine for coding agents, specialized per model"
  homepage "https://github.com/splash-llm/splash"
  license "Apache-2.0"
  head "https://github.com/splash-llm/splash.git", branch: "main"

  depends_on "node" => :build
  depends_on arch: :arm64
  depends_on macos: :sequoia

  def install
    system "npm", "ci", "--no-audit", "--no-fund"
    # native.ts builds libsplash (with the Metal backend on macOS), then binary.ts compiles dist/splash around it
    system "npm", "run", "build"
    bin.install "dist/splash"
  end

  test do
    assert_match(/^\d+\.\d+\.\d+$/, shell_output("#{bin}/splash --version").strip)
    ENV["SPLASH_CACHE_DIR"] = testpath/"cache"
    report = shell_output("#{bin}/splash doctor")
    assert_match "libsplash", report
    # the Mac lines (chip, macOS, unified memory, GPU) are there whether or not this Mac meets the minimum
    assert_match(/^GPU\s+(ok|FAIL)\s/, report)
  end
end
