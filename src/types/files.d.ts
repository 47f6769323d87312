// Files imported with `with { type: "file" }` resolve to a path (on disk, or inside the compiled binary).
declare module "*.so" {
  const path: string;
  export default path;
}
declare module "*.dylib" {
  const path: string;
  export default path;
}
declare module "*.safetensors" {
  const path: string;
  export default path;
}
declare module "*.jinja" {
  const path: string;
  export default path;
}
declare module "*.wasm" {
  const path: string;
  export default path;
}
