// What a bad image is: the API layer (src/api/errors.ts) turns it into a 400 whose code names the reason.
export class ImageError extends Error {
  override name = "ImageError";
  constructor(
    readonly reason: "unsupported" | "corrupt" | "too_large" | "fetch",
    message: string,
  ) {
    super(message);
  }
}
