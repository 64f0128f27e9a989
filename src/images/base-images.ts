/**
 * What a Dockerfile can start FROM offline, as the model is told: the language images first (built by
 * scripts/setup-docker.sh: `agenticfix/<runtime>:<short version>` and `:<full version>`, one image), with
 * their runtime's version, then the other base images.
 */

/** The language images' repositories (scripts/node-image.sh, scripts/python-image.sh) and the runtime each holds. */
export const NODE_REPO = 'agenticfix/node';
const RUNTIMES: Record<string, string> = { [NODE_REPO]: 'Node.js', 'agenticfix/python': 'Python' };
const FULL_VERSION = /^\d+\.\d+\.\d+$/;

export interface BaseImage {
  /** The tag to write in FROM: the short one of a language image (`agenticfix/node:22`). */
  tag: string;
  /** A language image's runtime and full version (`Node.js 22.23.5`), else null. */
  runtime: string | null;
  /** Its other tags (`agenticfix/node:22.23.5`). */
  aliases: string[];
}

const repoOf = (tag: string) => tag.slice(0, tag.lastIndexOf(':'));
const versionOf = (tag: string) => tag.slice(tag.lastIndexOf(':') + 1);

/**
 * The base images among the engine's images (`GET /images/json`): those `allowed` (the operator's base
 * image, the app's own), one entry per image, language images first (newest version first), then by tag.
 */
export function baseImages(
  images: readonly { RepoTags?: string[] | null }[],
  allowed: (tag: string) => boolean,
): BaseImage[] {
  const out = images.flatMap((image): BaseImage[] => {
    const tags = (image.RepoTags ?? []).filter(allowed);
    if (tags.length === 0) return [];
    // The shortest tag is what a Dockerfile names (`22` rather than `22.23.5`); ties by name.
    const [tag, ...aliases] = [...tags].sort((a, b) => a.length - b.length || a.localeCompare(b));
    const name = RUNTIMES[repoOf(tag!)];
    const full = tags.find((t) => repoOf(t) === repoOf(tag!) && FULL_VERSION.test(versionOf(t)));
    const runtime = name ? `${name} ${versionOf(full ?? tag!)}` : null;
    return [{ tag: tag!, runtime, aliases }];
  });
  const rank = (i: BaseImage) => (i.runtime ? 0 : 1);
  return out.sort(
    (a, b) =>
      rank(a) - rank(b) ||
      repoOf(a.tag).localeCompare(repoOf(b.tag)) ||
      b.tag.localeCompare(a.tag, undefined, { numeric: true }),
  );
}

/** One image as the model reads it: `agenticfix/node:22 (Node.js 22.23.5; also agenticfix/node:22.23.5)`. */
export function describeBaseImage(image: BaseImage): string {
  const notes = [...(image.runtime ? [image.runtime] : []), ...image.aliases.map((a) => `also ${a}`)];
  return notes.length > 0 ? `${image.tag} (${notes.join('; ')})` : image.tag;
}

/** The local image of a runtime (`agenticfix/node`), newest first, or null when there is none. */
export function runtimeImage(images: readonly BaseImage[], repo: string): BaseImage | null {
  return images.find((i) => i.runtime && repoOf(i.tag) === repo) ?? null;
}
