import type { StoreLocation } from './layout.js';
import type { ObjectStore } from './object-store.js';
import { createObjectStore } from './objects.js';
import { createS3ObjectStore, parseS3Url } from './s3-objects.js';

/**
 * The object store of an opened store: its `objects/` directory, or the bucket its config names
 * (SPEC.md §3b), read through `objects/` as a cache of verified objects.
 */
export function openObjectStore(location: StoreLocation): ObjectStore {
  const local = createObjectStore(location.directory);
  if (location.objects === undefined) return local;
  return createS3ObjectStore({ ...parseS3Url(location.objects), cache: local });
}
