/**
 * Webhook deliveries as GitHub sends them: a JSON POST signed with HMAC-SHA256 of the exact body.
 * Every delivery is kept so it can be redelivered byte for byte under the same delivery id.
 */
import { createHmac, randomUUID } from 'node:crypto';

export interface DeliveryResult {
  id: string;
  status: number;
  body: string;
}

export interface StoredDelivery {
  id: string;
  event: string;
  body: string;
}

export function signBody(secret: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

export class WebhookSender {
  readonly deliveries: StoredDelivery[] = [];

  constructor(
    /** Changed when the app is registered anew (a manifest conversion). */
    public secret: string,
    public url: string | undefined,
  ) {}

  /** Sends a new delivery; `signature` overrides the computed one (bad-signature tests). */
  deliver(event: string, payload: unknown, opts: { signature?: string } = {}): Promise<DeliveryResult> {
    const delivery = { id: randomUUID(), event, body: JSON.stringify(payload) };
    this.deliveries.push(delivery);
    return this.post(delivery, opts.signature);
  }

  redeliver(id: string): Promise<DeliveryResult> {
    return this.post(this.stored(id));
  }

  /** What an eavesdropper can do with a captured delivery: send its signed body under a new id. */
  replay(id: string): Promise<DeliveryResult> {
    return this.post({ ...this.stored(id), id: randomUUID() });
  }

  private stored(id: string): StoredDelivery {
    const delivery = this.deliveries.find((d) => d.id === id);
    if (!delivery) throw new Error(`unknown delivery ${id}`);
    return delivery;
  }

  private async post(delivery: StoredDelivery, signature?: string): Promise<DeliveryResult> {
    const url = this.url;
    if (!url) throw new Error('no webhook URL configured: pass webhookUrl or call setWebhookUrl()');
    const send = () =>
      fetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'GitHub-Hookshot/emulator',
          'x-github-event': delivery.event,
          'x-github-delivery': delivery.id,
          'x-hub-signature-256': signature ?? signBody(this.secret, delivery.body),
        },
        body: delivery.body,
      });
    // Once more on a network failure: a kept-alive socket the receiver closed as it was reused (seen
    // in CI between two of 101 deliveries in a row). A receiver that is down fails both times.
    const res = await send().catch((err: unknown) => {
      if (err instanceof TypeError) return send();
      throw err;
    });
    return { id: delivery.id, status: res.status, body: await res.text() };
  }
}
