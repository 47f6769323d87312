// An ordered set of ids 0..n-1 as an intrusive doubly linked list with one sentinel (vLLM's FreeKVCacheBlockQueue):
// O(1) push at either end, pop at the front and removal from the middle (a prefix-cache hit takes a page out of the
// free queue wherever it is). The front is what goes first.
export class FreeQueue {
  private readonly next: Int32Array;
  private readonly prev: Int32Array;
  private readonly member: Uint8Array;
  private readonly sentinel: number;
  size = 0;

  constructor(n: number) {
    this.next = new Int32Array(n + 1);
    this.prev = new Int32Array(n + 1);
    this.member = new Uint8Array(n);
    this.sentinel = n;
    this.next[n] = n;
    this.prev[n] = n;
  }

  has(id: number): boolean {
    return this.member[id] === 1;
  }

  pushBack(id: number): void {
    this.insertAfter(this.prev[this.sentinel]!, id);
  }

  pushFront(id: number): void {
    this.insertAfter(this.sentinel, id);
  }

  popFront(): number | undefined {
    const id = this.next[this.sentinel]!;
    if (id === this.sentinel) return undefined;
    this.remove(id);
    return id;
  }

  remove(id: number): void {
    if (!this.has(id)) throw new Error(`free queue: ${id} is not in the queue`);
    const p = this.prev[id]!;
    const n = this.next[id]!;
    this.next[p] = n;
    this.prev[n] = p;
    this.member[id] = 0;
    this.size--;
  }

  // Front to back.
  *[Symbol.iterator](): IterableIterator<number> {
    for (let id = this.next[this.sentinel]!; id !== this.sentinel; id = this.next[id]!) yield id;
  }

  private insertAfter(at: number, id: number): void {
    if (this.has(id)) throw new Error(`free queue: ${id} is already in the queue`);
    const n = this.next[at]!;
    this.next[at] = id;
    this.prev[id] = at;
    this.next[id] = n;
    this.prev[n] = id;
    this.member[id] = 1;
    this.size++;
  }
}
